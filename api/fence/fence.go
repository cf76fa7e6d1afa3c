// Package fence is the file of a fence the device ledger keeps on disk: a
// PF whose VFs are withdrawn from every front end while its VF layout
// changes. The file is written before the first sysfs write of the change
// and removed after the last, so an agent that dies in between finds, at
// its next start, which PF was half way and what it was being brought
// from and to: the PF stays fenced until the change is finished or undone.
//
// Versions:
//
//   - 1 (current): the PF, why, since when, and the layout change with a
//     checksum over them. Since the eSwitch mode became part of a layout,
//     a layout change may carry the mode it brings the PF to
//     ("target.eswitchMode") and the mode the PF had before
//     ("eswitchModeBefore"), which a rollback puts back: optional fields,
//     absent when the change leaves the mode be, so no new version. A
//     version 1 reader without them (an older hwnet) ignores them and
//     rolls the VFs back alone, leaving the mode as the change left it;
//     a file without them is read as a change that left the mode be.
//     Since a PF's scalable function count became part of a layout too,
//     a change may carry the count it brings the PF to ("target.numSFs")
//     and the sfnums the PF had ("sfsBefore", read only beside
//     target.numSFs: an empty list is omitted), which a rollback puts
//     back; optional in the same way, so a version 1 reader without them
//     leaves the SFs as the change left them.
//
// Decode reads a newer version as far as its fields are the current ones,
// its checksum unchecked, so that a rolled-back agent still sees the fence.
package fence

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Version is the format this hwnet writes.
const Version = 1

// MaxSize is the largest fence file read: a PF with 256 VFs takes some
// 20 KiB.
const MaxSize = 1 << 20

func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "device fence", Current: Version, MaxSize: MaxSize}
}

// Record is one fence.
type Record struct {
	// Key names the fence and its owner, e.g. "vf-layout/0000:3b:00.0".
	Key string `json:"key"`
	// PF is the PCI address of the fenced PF: the PF, its VFs and their
	// ports are withdrawn.
	PF string `json:"pf"`
	// Reason says why, as hwnetctl devices and refusals show it.
	Reason string `json:"reason"`
	// Since is when the fence was taken.
	Since time.Time `json:"since"`
	// Layout is the VF layout change under way, absent for other fences.
	Layout *LayoutChange `json:"layout,omitempty"`
}

// LayoutChange is what the PF had before the change and what the change
// brings it to.
type LayoutChange struct {
	// Name is the vfLayouts entry's name.
	Name   string `json:"name,omitempty"`
	Before []VF   `json:"before"`
	// ESwitchModeBefore is the PF's eSwitch mode before the change, ""
	// when the change leaves the mode be.
	ESwitchModeBefore string `json:"eswitchModeBefore,omitempty"`
	// SFsBefore are the sfnums of the PF's scalable functions before the
	// change, ascending; they mean something only when Target.NumSFs is
	// set, as the change leaves the SFs be otherwise.
	SFsBefore []int  `json:"sfsBefore,omitempty"`
	Target    Layout `json:"target"`
}

// VF is one VF as it was: its driver ("" unbound) and driver_override
// ("" unset).
type VF struct {
	Driver   string `json:"driver,omitempty"`
	Override string `json:"override,omitempty"`
}

// Layout is a VF count and the drivers an override binds VFs to, by VF
// index.
type Layout struct {
	NumVFs  int            `json:"numVFs"`
	Drivers map[int]string `json:"drivers,omitempty"`
	// ESwitchMode is the eSwitch mode the change brings the PF to, ""
	// when it leaves the mode be.
	ESwitchMode string `json:"eswitchMode,omitempty"`
	// NumSFs is the number of scalable functions the change brings the
	// PF to, nil when it leaves them be.
	NumSFs *int `json:"numSFs,omitempty"`
}

// ESwitch modes a fence may name: devlink's.
var eswitchModes = []string{"", "legacy", "switchdev"}

// Validate checks what every reader relies on: a key and a PF address.
func (r *Record) Validate() error {
	switch {
	case r.Key == "":
		return errors.New("key: empty")
	case strings.ContainsAny(r.Key, "\x00\n"):
		return fmt.Errorf("key %q: a NUL or newline", r.Key)
	case r.PF == "":
		return fmt.Errorf("fence %s: pf: empty", r.Key)
	}
	l := r.Layout
	switch {
	case l == nil:
	case l.Target.NumVFs < 0:
		return fmt.Errorf("fence %s: layout.target.numVFs: %d is negative", r.Key, l.Target.NumVFs)
	case !slices.Contains(eswitchModes, l.ESwitchModeBefore):
		return fmt.Errorf("fence %s: layout.eswitchModeBefore: %q: want legacy or switchdev", r.Key, l.ESwitchModeBefore)
	case !slices.Contains(eswitchModes, l.Target.ESwitchMode):
		return fmt.Errorf("fence %s: layout.target.eswitchMode: %q: want legacy or switchdev", r.Key, l.Target.ESwitchMode)
	case l.Target.NumSFs != nil && *l.Target.NumSFs < 0:
		return fmt.Errorf("fence %s: layout.target.numSFs: %d is negative", r.Key, *l.Target.NumSFs)
	case l != nil:
		return checkSFNums(r.Key, l.SFsBefore)
	}
	return nil
}

// checkSFNums refuses sfnums a rollback could not add back: negative or
// twice the same.
func checkSFNums(key string, nums []int) error {
	for i, n := range nums {
		if n < 0 || slices.Contains(nums[:i], n) {
			return fmt.Errorf("fence %s: layout.sfsBefore[%d]: %d is negative or given twice", key, i, n)
		}
	}
	return nil
}

// Encode is the fence's file content in the current version.
func Encode(r *Record) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("device fence: %w", err)
	}
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("device fence: %w", err)
	}
	sum, err := fileformat.Checksum(payload)
	if err != nil {
		return nil, fmt.Errorf("device fence: %w", err)
	}
	file := struct {
		Version  int             `json:"version"`
		Checksum uint32          `json:"checksum"`
		Fence    json.RawMessage `json:"fence"`
	}{Version, sum, payload}
	return json.MarshalIndent(&file, "", "  ")
}

// Load reads the fence file at path; its errors name the file.
func Load(path string) (*Record, error) {
	return fileformat.Load(fileFormat(), path, Decode)
}

// Decode reads a fence file. The current version must be whole and
// match its checksum; a newer one is read as far as its fields are
// known.
func Decode(data []byte) (*Record, error) {
	r, err := fileformat.Decode(fileFormat(), data, fileformat.Decoders[*Record]{
		Older: func([]byte, fileformat.Header) (*Record, error) { return nil, errors.New("no such version") },
		Same:  decodeCurrent, Newer: decodeNewer,
	})
	if err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("device fence: %w: %w", fileformat.ErrMalformed, err)
	}
	return r, nil
}

func decodeCurrent(object []byte, h fileformat.Header) (*Record, error) {
	payload, _, err := fileformat.VerifiedPayload(object, h, "fence")
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(payload, &r); err != nil {
		return nil, fmt.Errorf("%w: fence: %w", fileformat.ErrMalformed, err)
	}
	return &r, nil
}

func decodeNewer(object []byte, _ fileformat.Header) (*Record, error) {
	payload, err := fileformat.Payload(object, "fence")
	if err != nil {
		return nil, err
	}
	var r Record
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(payload, &r); err != nil && !errors.As(err, &typeErr) {
		return nil, fmt.Errorf("%w: fence: %w", fileformat.ErrMalformed, err)
	}
	return &r, nil
}

// FileName is the fence's file name in its directory: the key with every
// character but letters, digits, '.', '-' and '_' written as '_'.
func FileName(key string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, key) + ".json"
}
