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

// Set is one recorded set: the PF, by PCI address, and the mode it was
// put in.
type Set struct {
	PCIAddress string `json:"pciAddress"`
	Mode       string `json:"mode"`
}

// Record is an ESwitch that sets nothing and appends each set, one JSON
// object a line, to a file: an append-only log that outlives an agent
// killed mid-way and that a test reads while the agent runs. Its
// ESwitchMode answers with the last mode the file sets on the PF, legacy
// when none, as the kernel boots every PF. It is safe for concurrent use,
// and a reader in another process never sees half a line.
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
	if err := ctx.Err(); err != nil {
		return err
	}
	s := Set{PCIAddress: pciAddress, Mode: mode}
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
	mode := ModeLegacy
	for _, s := range sets {
		if s.PCIAddress == pciAddress {
			mode = s.Mode
		}
	}
	return mode, nil
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
		return Set{}, fmt.Errorf("not a set {\"pciAddress\": ..., \"mode\": ...}: %w", err)
	}
	if rest := bytes.TrimSpace(line[dec.InputOffset():]); len(rest) > 0 {
		return Set{}, fmt.Errorf("%q after the set", rest)
	}
	return s, s.check()
}

// check refuses a set without a PF or with a mode hwnet does not set.
func (s Set) check() error {
	if s.PCIAddress == "" {
		return errors.New("pciAddress: empty")
	}
	return CheckMode(s.Mode)
}
