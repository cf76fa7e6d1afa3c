package cniplugins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRecords(t *testing.T) {
	tests := []struct {
		name, input string
		want        int
		wantErr     string
	}{
		{"empty", "", 0, ""},
		{"two", `{"command":"ADD","env":{"CNI_IFNAME":"net1"},"stdin":{"name":"n"},"time":"2026-11-21T10:00:00Z"}` + "\n" +
			`{"command":"DEL","env":{},"stdin":{},"time":"2026-11-21T10:00:01Z"}` + "\n", 2, ""},
		{"torn line", `{"command":"ADD","env":{}` + "\n", 0, "record 1"},
		{"no command", `{"env":{}}` + "\n", 0, `record 1 has no "command"`},
		{"bad time", `{"command":"ADD","time":"yesterday"}`, 0, "record 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			records, err := parseRecords(strings.NewReader(tt.input))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(records) != tt.want {
				t.Fatalf("got %d records, %v; want %d", len(records), err, tt.want)
			}
		})
	}
}

func TestReadRecordsMissingFileIsNoRecords(t *testing.T) {
	if got := ReadRecords(t, filepath.Join(t.TempDir(), "never-written")); got != nil {
		t.Errorf("ReadRecords of a missing file = %v, want none", got)
	}
}

func TestReadRecordsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	line := `{"command":"GC","env":{"CNI_COMMAND":"GC"},"stdin":{"cniVersion":"1.1.0"},"time":"2026-11-21T10:00:00Z"}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	records := ReadRecords(t, path)
	if len(records) != 1 || records[0].Env["CNI_COMMAND"] != "GC" || string(records[0].Stdin) != `{"cniVersion":"1.1.0"}` {
		t.Errorf("records = %+v", records)
	}
}

func FuzzParseRecords(f *testing.F) {
	f.Add(`{"command":"ADD","env":{"CNI_ARGS":"a=b"},"stdin":{"x":[1]},"time":"2026-11-21T10:00:00Z"}` + "\n")
	f.Add(`{"command":"DEL"}{"command":"CHECK"}`)
	f.Add(`{"command":`)
	f.Add("\n\n")
	f.Fuzz(func(t *testing.T, input string) {
		records, err := parseRecords(strings.NewReader(input))
		if err != nil {
			return
		}
		for _, r := range records {
			if r.Command == "" {
				t.Errorf("record without command accepted: %+v", r)
			}
		}
	})
}
