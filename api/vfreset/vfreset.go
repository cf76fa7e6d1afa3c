// Package vfreset is the file of a VF settings reset hwnet owes: the
// pod that had the VF is gone, and what was set on it (its VLAN, trust,
// spoof check, MAC...) is not put back yet, because the shim tore the
// pod down with the agent away (it cannot set VF settings) or the reset
// failed (a netdev not back in the node's network namespace yet). One
// file per VF, named by its PCI address, written before the attachment
// record it comes from is removed; the device ledger withholds the VF from
// every pool while it is there, and the agent performs it, at start
// before it serves and at each ledger read after, removing it once done.
//
// Versions:
//
//   - 1 (current): the VF's settings record (api/vfsettings), why the
//     reset is pending and since when, with a checksum over them (the
//     payload's bytes, so a reader that ignores a newer record's fields,
//     such as issue 45's "pKey" and "priorPKeyIndex", still checks it).
//
// Decode reads a newer version as far as its fields are the current ones,
// its checksum unchecked, so that a rolled-back agent still withholds the
// VF and resets it.
package vfreset

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Version is the format this hwnet writes.
const Version = 1

// MaxSize is the largest file read: a record takes well under 2 KiB.
const MaxSize = 64 << 10

// SubDir is the directory, under the CNI cache directory the shim and
// the agent share, that holds the pending resets.
const SubDir = "vf-resets"

func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "pending VF reset", Current: Version, MaxSize: MaxSize}
}

// Pending is one reset owed.
type Pending struct {
	// Record is what was set on the VF and what it had before: the
	// reset puts Record.Prior back (vfsettings.Record.Restore).
	Record vfsettings.Record `json:"record"`
	// Reason says who left it and why, as hwnetctl devices shows it.
	Reason string `json:"reason"`
	// Since is when it was left.
	Since time.Time `json:"since"`
}

// Validate checks what every reader relies on: the VF's PCI address,
// which names the file and the device withheld.
func (p *Pending) Validate() error {
	a := p.Record.PCIAddress
	switch {
	case a == "":
		return errors.New("record.pciAddress: empty")
	case strings.ContainsAny(a, "/\x00\n") || a == "." || a == "..":
		return fmt.Errorf("record.pciAddress %q: not a PCI address", a)
	}
	return nil
}

// Encode is the file content in the current version.
func Encode(p *Pending) ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("pending VF reset: %w", err)
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("pending VF reset: %w", err)
	}
	sum, err := fileformat.Checksum(payload)
	if err != nil {
		return nil, fmt.Errorf("pending VF reset: %w", err)
	}
	file := struct {
		Version  int             `json:"version"`
		Checksum uint32          `json:"checksum"`
		Reset    json.RawMessage `json:"reset"`
	}{Version, sum, payload}
	return json.MarshalIndent(&file, "", "  ")
}

// Decode reads a file. The current version must be whole and match its
// checksum; a newer one is read as far as its fields are known.
func Decode(data []byte) (*Pending, error) {
	p, err := fileformat.Decode(fileFormat(), data, fileformat.Decoders[*Pending]{
		Older: func([]byte, fileformat.Header) (*Pending, error) { return nil, errors.New("no such version") },
		Same:  decodeCurrent, Newer: decodeNewer,
	})
	if err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("pending VF reset: %w: %w", fileformat.ErrMalformed, err)
	}
	return p, nil
}

func decodeCurrent(object []byte, h fileformat.Header) (*Pending, error) {
	payload, _, err := fileformat.VerifiedPayload(object, h, "reset")
	if err != nil {
		return nil, err
	}
	var p Pending
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, fmt.Errorf("%w: reset: %w", fileformat.ErrMalformed, err)
	}
	return &p, nil
}

func decodeNewer(object []byte, _ fileformat.Header) (*Pending, error) {
	payload, err := fileformat.Payload(object, "reset")
	if err != nil {
		return nil, err
	}
	var p Pending
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(payload, &p); err != nil && !errors.As(err, &typeErr) {
		return nil, fmt.Errorf("%w: reset: %w", fileformat.ErrMalformed, err)
	}
	return &p, nil
}

// Dir is the pending resets' directory under the CNI cache directory.
func Dir(cacheDir string) string { return filepath.Join(cacheDir, SubDir) }

func path(dir, pci string) string { return filepath.Join(dir, pci+".json") }

// Leave writes p into dir, unless a reset of the same VF is pending
// already: that one holds what the VF had first, which is what it must
// get back.
func Leave(dir string, p *Pending) error {
	data, err := Encode(p)
	if err != nil {
		return err
	}
	file := path(dir, p.Record.PCIAddress)
	if _, err := os.Stat(file); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pending VF reset of %s: %w", p.Record.PCIAddress, err)
	}
	if err := atomicfile.Write(file, data, 0o600); err != nil {
		return fmt.Errorf("pending VF reset of %s: %w", p.Record.PCIAddress, err)
	}
	return nil
}

// Done removes the reset of the VF at pci; one already gone is no error.
func Done(dir, pci string) error {
	if err := os.Remove(path(dir, pci)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pending VF reset of %s: %w", pci, err)
	}
	return nil
}

// List reads every pending reset in dir, sorted by PCI address; a missing
// directory holds none. A file that cannot be read is an error naming
// it: the VF it withholds is not known.
func List(dir string) ([]Pending, error) {
	out, err := fileformat.LoadDir(dir, func(path string) (Pending, error) {
		p, err := fileformat.Load(fileFormat(), path, Decode)
		if err != nil {
			return Pending{}, err
		}
		return *p, nil
	})
	slices.SortFunc(out, func(a, b Pending) int { return strings.Compare(a.Record.PCIAddress, b.Record.PCIAddress) })
	return out, err
}
