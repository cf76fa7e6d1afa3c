package cniplugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"testing"
	"time"
)

// Record is one invocation of hwnet-test-plugin, as it appends them to the
// file its netconf key "recordFile" names.
type Record struct {
	// Command is the CNI command: ADD, DEL, CHECK, STATUS or GC.
	Command string `json:"command"`
	// Env holds every CNI_* environment variable the plugin was run with.
	Env map[string]string `json:"env"`
	// Stdin is the network configuration exactly as the plugin received it.
	Stdin json.RawMessage `json:"stdin"`
	Time  time.Time       `json:"time"`
}

// ReadRecords returns the records in path, oldest first, and none when the
// plugin never wrote the file.
func ReadRecords(t testing.TB, path string) []Record {
	t.Helper()
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatalf("cniplugins: %v", err)
	}
	defer f.Close()
	records, err := parseRecords(f)
	if err != nil {
		t.Fatalf("cniplugins: %s: %v", path, err)
	}
	return records
}

// parseRecords decodes a stream of records, one JSON object per line.
func parseRecords(r io.Reader) ([]Record, error) {
	var records []Record
	dec := json.NewDecoder(r)
	for {
		var rec Record
		err := dec.Decode(&rec)
		if errors.Is(err, io.EOF) {
			return records, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", len(records)+1, err)
		}
		if rec.Command == "" {
			return nil, fmt.Errorf("record %d has no \"command\"", len(records)+1)
		}
		records = append(records, rec)
	}
}
