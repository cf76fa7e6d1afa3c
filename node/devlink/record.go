package devlink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// MaxRecordSize is the largest record file read: some 15,000 sets, far
// more than a test or a virtual node makes.
const MaxRecordSize = 1 << 20

// Set is one recorded set on a PF, by PCI address: the eSwitch mode it
// was put in, or an SF port added (AddSF: the port added and activated)
// or deleted (DeleteSF), by sfnum.
type Set struct {
	PCIAddress string `json:"pciAddress"`
	Mode       string `json:"mode,omitempty"`
	// Port is PortAdd or PortDel, and SFNum the SF's sfnum, for an SF.
	Port  string `json:"port,omitempty"`
	SFNum *int   `json:"sfnum,omitempty"`
}

// The SF port changes a record keeps.
const (
	PortAdd = "add"
	PortDel = "del"
)

// Record is an ESwitch that sets nothing and appends each set, one JSON
// object a line, to a file: an append-only log that outlives an agent
// killed mid-way and that a test, or the virtual node's kernel emulation,
// reads while the agent runs. Its ESwitchMode answers with the last mode
// the file sets on the PF, legacy when none, as the kernel boots every
// PF; its AddSF is refused, as mlx5 refuses a port add, while that mode is
// not switchdev. It is safe for concurrent use, and a reader in another
// process never sees half a line.
type Record struct {
	path string
	mu   sync.Mutex
}

// NewRecord records to the file at path, made with its directory when
// first written.
func NewRecord(path string) *Record { return &Record{path: path} }

// Path is the file the record appends to.
func (r *Record) Path() string { return r.path }

// SetESwitchMode appends the set with a single write.
func (r *Record) SetESwitchMode(ctx context.Context, pciAddress, mode string) error {
	return r.append(ctx, Set{PCIAddress: pciAddress, Mode: mode})
}

// AddSF appends the port add, unless the record's mode of the PF is not
// switchdev.
func (r *Record) AddSF(ctx context.Context, pciAddress string, sfnum int) error {
	mode, err := r.ESwitchMode(ctx, pciAddress)
	if err != nil {
		return err
	}
	if mode != ModeSwitchdev {
		return fmt.Errorf("devlink record %s: PF %s: port add sfnum %d: the eSwitch is in %s mode; SFs are ports of the switchdev eSwitch (EOPNOTSUPP)",
			r.path, pciAddress, sfnum, mode)
	}
	return r.append(ctx, Set{PCIAddress: pciAddress, Port: PortAdd, SFNum: &sfnum})
}

// DeleteSF appends the port del.
func (r *Record) DeleteSF(ctx context.Context, pciAddress string, sfnum int) error {
	return r.append(ctx, Set{PCIAddress: pciAddress, Port: PortDel, SFNum: &sfnum})
}

// append checks s and appends it with a single write.
func (r *Record) append(ctx context.Context, s Set) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.check(); err != nil {
		return fmt.Errorf("devlink record %s: %w", r.path, err)
	}
	line, err := json.Marshal(s)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := atomicfile.AppendLine(r.path, line); err != nil {
		return fmt.Errorf("devlink record: %w", err)
	}
	return nil
}

// ESwitchMode is the last mode the file sets on the PF, legacy when it
// sets none or does not exist.
func (r *Record) ESwitchMode(ctx context.Context, pciAddress string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	r.mu.Lock()
	sets, err := ReadSets(r.path)
	r.mu.Unlock()
	if err != nil {
		return "", err
	}
	return Fold(sets).PF(pciAddress).Mode, nil
}

// PF is what a record's sets leave one PF with.
type PF struct {
	// Mode is the last mode set, legacy when none was.
	Mode string
	// SFs are the sfnums whose last set is a port add (true) or a port
	// del (false); an sfnum the record never names is not there.
	SFs map[int]bool
}

// Folded is what a record's sets leave each PF with, by PCI address.
type Folded map[string]PF

// PF is what the sets leave the PF at pciAddress with: legacy, no SF
// named, when they never name it.
func (f Folded) PF(pciAddress string) PF {
	pf, ok := f[pciAddress]
	if !ok {
		pf.Mode = ModeLegacy
	}
	return pf
}

// Fold is what sets, in order, leave each PF with.
func Fold(sets []Set) Folded {
	out := Folded{}
	for _, s := range sets {
		pf := out.PF(s.PCIAddress)
		switch {
		case s.Mode != "":
			pf.Mode = s.Mode
		default:
			if pf.SFs == nil {
				pf.SFs = map[int]bool{}
			}
			pf.SFs[*s.SFNum] = s.Port == PortAdd
		}
		out[s.PCIAddress] = pf
	}
	return out
}

// ReadSets reads the sets recorded at path, none when it does not exist.
// Its errors name the file.
func ReadSets(path string) ([]Set, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("devlink record: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxRecordSize+1))
	if err != nil {
		return nil, fmt.Errorf("devlink record %s: %w", path, err)
	}
	if len(data) > MaxRecordSize {
		return nil, fmt.Errorf("devlink record %s: more than %d bytes", path, MaxRecordSize)
	}
	sets, err := ParseSets(data)
	if err != nil {
		return nil, fmt.Errorf("devlink record %s: %w", path, err)
	}
	return sets, nil
}

// ParseSets reads a record file's content, one set a line. A line that
// is not a set is an error naming it: a record edited or written by
// something else says nothing certain about any PF's mode after it.
func ParseSets(data []byte) ([]Set, error) {
	var sets []Set
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, MaxRecordSize)
	for n := 1; sc.Scan(); n++ {
		s, err := parseSet(sc.Bytes())
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		sets = append(sets, s)
	}
	return sets, sc.Err()
}

// parseSet reads one line: a JSON object with a PCI address and a mode.
func parseSet(line []byte) (Set, error) {
	var s Set
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Set{}, fmt.Errorf("not a set {\"pciAddress\": ..., \"mode\" or \"port\" and \"sfnum\": ...}: %w", err)
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return Set{}, fmt.Errorf("%q after the set", rest)
	}
	return s, s.check()
}

// check refuses a set without a PF, with a mode hwnet does not set, or
// that is not one mode or one SF port change.
func (s Set) check() error {
	switch {
	case s.PCIAddress == "":
		return errors.New("pciAddress: empty")
	case s.Port == "" && s.SFNum == nil:
		return CheckMode(s.Mode)
	case s.Mode != "":
		return fmt.Errorf("mode %q with port %q: a set is one or the other", s.Mode, s.Port)
	case s.Port != PortAdd && s.Port != PortDel:
		return fmt.Errorf("port %q: want %q or %q", s.Port, PortAdd, PortDel)
	case s.SFNum == nil:
		return fmt.Errorf("port %s: no sfnum", s.Port)
	}
	return CheckSFNum(*s.SFNum)
}
