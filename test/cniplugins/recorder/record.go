package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// record is one line of the record file. cniplugins.Record reads it; the
// two are kept apart so that the recorder imports nothing from hwnet.
type record struct {
	Command string            `json:"command"`
	Env     map[string]string `json:"env"`
	Stdin   json.RawMessage   `json:"stdin"`
	Time    time.Time         `json:"time"`
}

// appendRecord appends one line for this invocation to path. The line goes
// out in a single write on an O_APPEND descriptor so that plugins running in
// parallel never interleave their lines.
func appendRecord(path, command string, stdin []byte, now time.Time) error {
	line, err := json.Marshal(record{Command: command, Env: cniEnv(), Stdin: stdin, Time: now})
	if err != nil {
		return fmt.Errorf("record %s: %w", command, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("record %s: %w", command, err)
	}
	_, err = f.Write(append(line, '\n'))
	if closeErr := f.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return fmt.Errorf("record %s in %s: %w", command, path, err)
	}
	return nil
}

// cniEnv returns every CNI_* variable of the environment, CNI_ARGS included.
func cniEnv() map[string]string {
	env := make(map[string]string)
	for _, kv := range os.Environ() {
		key, value, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(key, "CNI_") {
			env[key] = value
		}
	}
	return env
}
