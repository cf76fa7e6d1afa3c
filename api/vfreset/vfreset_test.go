package vfreset_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

func pending(pci string, vlan int) *vfreset.Pending {
	return &vfreset.Pending{Record: vfsettings.Record{PFPCIAddress: "0000:3b:00.0", PCIAddress: pci, Prior: &vfsettings.Settings{VLAN: &vlan}},
		Reason: "test", Since: time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)}
}

// TestLeaveListDone: a reset left is listed with its record; a second
// one for the same VF keeps the first (what the VF had first); Done
// removes it, twice without error.
func TestLeaveListDone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), vfreset.SubDir)
	if got, err := vfreset.List(dir); err != nil || len(got) != 0 {
		t.Fatalf("a missing directory: %v %v, want none", got, err)
	}
	for _, vlan := range []int{42, 100} {
		if err := vfreset.Leave(dir, pending("0000:3b:01.1", vlan)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := vfreset.List(dir)
	if err != nil || len(got) != 1 || *got[0].Record.Prior.VLAN != 42 || !got[0].Since.Equal(pending("", 0).Since) {
		t.Fatalf("listed %+v (%v), want the first reset left", got, err)
	}
	for range 2 {
		if err := vfreset.Done(dir, "0000:3b:01.1"); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := vfreset.List(dir); len(got) != 0 {
		t.Errorf("after Done: %+v", got)
	}
}

// TestDecode: a torn file or a wrong checksum is refused, a newer
// version read as far as it is known, a record without the VF's address
// refused naming the field.
func TestDecode(t *testing.T) {
	data, err := vfreset.Encode(pending("0000:3b:01.1", 42))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vfreset.Decode(data[:len(data)/2]); !errors.Is(err, fileformat.ErrMalformed) {
		t.Errorf("torn: %v", err)
	}
	if _, err := vfreset.Decode([]byte(strings.Replace(string(data), `"test"`, `"edit"`, 1))); !errors.Is(err, fileformat.ErrChecksum) {
		t.Errorf("edited: %v", err)
	}
	newer := `{"version": 2, "checksum": "sha256:x", "reset": {"record": {"pciAddress": "0000:3b:01.1"}, "reason": "r", "new": 1}}`
	if p, err := vfreset.Decode([]byte(newer)); err != nil || p.Record.PCIAddress != "0000:3b:01.1" {
		t.Errorf("newer: %+v %v", p, err)
	}
	if _, err := vfreset.Encode(&vfreset.Pending{}); err == nil || !strings.Contains(err.Error(), "record.pciAddress: empty") {
		t.Errorf("no address: %v", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "0000:3b:01.2.json"), data[:10], 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := vfreset.List(dir); err == nil || !strings.Contains(err.Error(), "0000:3b:01.2.json") {
		t.Errorf("a torn file in the directory: %v, want an error naming it", err)
	}
}
