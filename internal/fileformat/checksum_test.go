package fileformat_test

import (
	"encoding/json"
	"testing"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// TestChecksumMarshaled: the sum of a payload as json.Marshal writes it is
// Checksum's, which a reader computes on the file's payload however it is
// indented.
func TestChecksumMarshaled(t *testing.T) {
	v := map[string]any{"uid-a": map[string]any{"name": "a <b> & c", "pods": []string{"p 1", "p2"}, "n": 1.5, "ok": true}}
	marshaled, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	indented, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want, err := fileformat.Checksum(indented)
	if err != nil {
		t.Fatal(err)
	}
	if got := fileformat.ChecksumMarshaled(marshaled); got != want {
		t.Errorf("ChecksumMarshaled = %d, Checksum of the indented payload = %d", got, want)
	}
}
