package capture

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

func valid() *Capture {
	return &Capture{Kernel: "6.1.0", Taken: time.Date(2026, 11, 29, 21, 0, 0, 0, time.UTC), Entries: []Entry{
		{Path: "sys/devices", Kind: Dir},
		{Path: "sys/devices/pci0000:3a", Kind: Dir},
		{Path: "sys/devices/pci0000:3a/0000:3b:00.0", Kind: Dir},
		{Path: "sys/devices/pci0000:3a/0000:3b:00.0/vendor", Kind: File, Data: "0x8086\n"},
		{Path: "sys/bus", Kind: Dir},
		{Path: "sys/bus/pci/devices/0000:3b:00.0", Kind: Link, Target: "../../../devices/pci0000:3a/0000:3b:00.0"},
		{Path: "dev/vfio/12", Kind: Device},
	}}
}

func TestRoundTrip(t *testing.T) {
	data, err := Encode(valid())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, valid()) {
		t.Errorf("decoded %+v, want %+v", got, valid())
	}
}

// TestDecodeRefuses: an entry that could write, or lead, outside the
// directory it is unpacked in, or that breaks a limit, fails the capture
// whole, naming the entry.
func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name  string
		entry Entry
		want  string
	}{
		{"absolute path", Entry{Path: "/etc/passwd", Kind: File}, `entries[7] "/etc/passwd": path: not a clean relative path`},
		{"climbing path", Entry{Path: "sys/../../etc", Kind: Dir}, "path: not a clean relative path"},
		{"outside sys and dev", Entry{Path: "etc/passwd", Kind: File}, "path: not under sys/ or dev/"},
		{"unknown kind", Entry{Path: "sys/x", Kind: "fifo"}, `kind "fifo": want dir, file, link or dev`},
		{"absolute target", Entry{Path: "sys/x", Kind: Link, Target: "/etc"}, `target "/etc": want a clean relative path`},
		{"target out", Entry{Path: "sys/x", Kind: Link, Target: "../../etc"}, `target "../../etc": not a clean relative path`},
		{"target climbing after a name", Entry{Path: "sys/x", Kind: Link, Target: "devices/../../sys/y"}, "want a clean relative path"},
		{"below a link", Entry{Path: "sys/bus/pci/devices/0000:3b:00.0/evil", Kind: File}, `below "sys/bus/pci/devices/0000:3b:00.0", not a directory`},
		{"below a file", Entry{Path: "sys/devices/pci0000:3a/0000:3b:00.0/vendor/x", Kind: File}, "not a directory"},
		{"twice", Entry{Path: "sys/devices", Kind: File}, "a second entry (the first a dir)"},
		{"big file", Entry{Path: "sys/big", Kind: File, Data: strings.Repeat("x", MaxFileData+1)}, "data: 65537 bytes, more than 65536"},
		{"long path", Entry{Path: "sys/" + strings.Repeat("a", MaxPath), Kind: Dir}, "more than 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			c.Entries = append(c.Entries, tt.entry)
			if _, err := Encode(c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Encode: %v, want an error containing %q", err, tt.want)
			}
			data := []byte(`{"version": 1, "capture": ` + string(mustJSON(t, c)) + `}`)
			_, err := Decode(data)
			if err == nil || !errors.Is(err, fileformat.ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode: %v, want a malformed capture error containing %q", err, tt.want)
			}
		})
	}
}

func TestDecodeVersions(t *testing.T) {
	for _, tt := range []struct{ data, want string }{
		{`{"version": 2, "capture": {"entries": []}}`, "version 2: no such version: this hwnet reads version 1"},
		{`{"version": 1}`, "no capture"},
		{`{"version": 1, "capture": {"entries": "x"}}`, "cannot unmarshal"},
		{`[]`, "malformed"},
	} {
		if _, err := Decode([]byte(tt.data)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Decode(%s): %v, want an error containing %q", tt.data, err, tt.want)
		}
	}
}

// FuzzDecode: no input panics; what Decode accepts, Encode writes and
// Decode reads back the same.
func FuzzDecode(f *testing.F) {
	data, err := Encode(valid())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte(`{"version": 1, "capture": {"entries": [{"path": "sys/x", "kind": "link", "target": "../y"}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(c)
		if err != nil {
			t.Fatalf("Encode of a decoded capture: %v", err)
		}
		back, err := Decode(again)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip: %v\n%+v\nwant %+v", err, back, c)
		}
	})
}

func mustJSON(t *testing.T, c *Capture) []byte {
	t.Helper()
	data, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
