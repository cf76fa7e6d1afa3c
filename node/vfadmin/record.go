package vfadmin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Call is one recorded call: the attribute, the VF and the value set, as
// text ("100 qos 0 proto 802.1Q", "on", "0-1000", "auto", a MAC, "1500").
type Call struct {
	Op         string `json:"op"`
	PF         string `json:"pf"`
	VF         int    `json:"vf"`
	PCIAddress string `json:"pciAddress"`
	Value      string `json:"value"`
}

// Recorder is an Admin that sets nothing and appends each call, one JSON
// object a line, to a file: an append-only log that a test reads while
// the agent runs, and that outlives an agent killed mid-way.
type Recorder struct {
	path string
	mu   sync.Mutex
}

// NewRecorder records to the file at path, made with its directory when
// first written.
func NewRecorder(path string) *Recorder { return &Recorder{path: path} }

// Path is the file the recorder appends to.
func (r *Recorder) Path() string { return r.path }

func (r *Recorder) SetVLAN(ctx context.Context, vf VF, vlan, qos int, proto string) error {
	return r.record(ctx, "vlan", vf, fmt.Sprintf("%d qos %d proto %s", vlan, qos, proto))
}

func (r *Recorder) SetSpoofChk(ctx context.Context, vf VF, on bool) error {
	return r.record(ctx, "spoofchk", vf, onOff(on))
}

func (r *Recorder) SetTrust(ctx context.Context, vf VF, on bool) error {
	return r.record(ctx, "trust", vf, onOff(on))
}

func (r *Recorder) SetRate(ctx context.Context, vf VF, minRate, maxRate uint64) error {
	return r.record(ctx, "rate", vf, fmt.Sprintf("%d-%d", minRate, maxRate))
}

func (r *Recorder) SetLinkState(ctx context.Context, vf VF, state string) error {
	return r.record(ctx, "linkState", vf, state)
}

func (r *Recorder) SetMAC(ctx context.Context, vf VF, mac string) error {
	return r.record(ctx, "macAddress", vf, mac)
}

func (r *Recorder) SetMTU(ctx context.Context, vf VF, mtu int) error {
	return r.record(ctx, "mtu", vf, strconv.Itoa(mtu))
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// record appends one line with a single write, so that a reader never
// sees half a call from a recorder in another process.
func (r *Recorder) record(ctx context.Context, op string, vf VF, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	line, err := json.Marshal(Call{Op: op, PF: vf.PF, VF: vf.Index, PCIAddress: vf.PCIAddress, Value: value})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(r.path), 0o755); err != nil {
		return fmt.Errorf("VF admin record: %w", err)
	}
	f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("VF admin record: %w", err)
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Sync(), f.Close())
}

// ParseCalls reads a recorder's file content, one call a line.
func ParseCalls(data []byte) ([]Call, error) {
	var calls []Call
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return calls, fmt.Errorf("VF admin record line %d: %w", n, err)
		}
		calls = append(calls, c)
	}
	return calls, sc.Err()
}

// ReadCalls reads the calls recorded at path, none when it does not exist.
func ReadCalls(path string) ([]Call, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseCalls(data)
}
