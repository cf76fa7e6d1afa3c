// Package logging builds the structured logger of hwnet's daemons from
// their --log-format and --log-level flags, so every binary logs alike.
package logging

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
)

// Flags declares --log-format and --log-level on fs; the returned function
// builds the logger once fs is parsed.
func Flags(fs *flag.FlagSet) func(w io.Writer) (*slog.Logger, error) {
	format := fs.String("log-format", "json", "log format: json or text")
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	return func(w io.Writer) (*slog.Logger, error) { return New(w, *format, *level) }
}

// New returns a logger writing to w in format ("json" or "text") at level.
func New(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return slog.Default(), fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.Default(), fmt.Errorf("--log-format %q: want json or text", format)
}
