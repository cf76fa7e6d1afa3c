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
	"slices"
	"strconv"
	"sync"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// Call is one recorded call: the attribute, the VF and the value set, as
// text ("100 qos 0 proto 802.1Q", "on", "0-1000", "auto", a MAC, "1500").
type Call struct {
	Op         string `json:"op"`
	PF         string `json:"pf"`
	VF         int    `json:"vf"`
	PCIAddress string `json:"pciAddress"`
	Value      string `json:"value"`
	// Seed marks what a test or an admin set before hwnet (Seed), not a
	// call hwnet made.
	Seed bool `json:"seed,omitempty"`
}

// Recorder is an Admin that sets nothing and appends each call, one JSON
// object a line, to a file: an append-only log that a test reads while
// the agent runs, and that outlives an agent killed mid-way. Its Read
// answers with what the file says was last set (or seeded) on the VF,
// over a new VF's defaults, so that a reset's restore is checked for real.
// With a sysfs root it finds the PF's netdev and the VF's as Netlink does
// (by PCI address; ErrGone, ErrNotBack) and records the PF's name as it
// is at the call.
type Recorder struct {
	path string
	// SysfsRoot, when set, is where the netdevs are found.
	SysfsRoot string
	seed      bool
	mu        sync.Mutex
}

// NewRecorder records to the file at path, made with its directory when
// first written.
func NewRecorder(path string) *Recorder { return &Recorder{path: path} }

// Seed records s on vf as set before hwnet: an admin's own settings,
// which Read then reports and a reset must put back.
func (r *Recorder) Seed(ctx context.Context, vf VF, s vfsettings.Settings) error {
	return Apply(ctx, &Recorder{path: r.path, SysfsRoot: r.SysfsRoot, seed: true}, vf, s, nil)
}

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

// PKeyTable is the PF's real table: the recorder sets nothing, so a
// lookup reads what is there. Without a sysfs root it has none.
func (r *Recorder) PKeyTable(ctx context.Context, vf VF) ([]string, error) {
	if r.SysfsRoot == "" {
		return nil, fmt.Errorf("VF admin record: %w: no sysfs to read the P_Key table from", ErrNoPKeys)
	}
	return IOV{r.SysfsRoot}.PKeyTable(ctx, vf)
}

// PKeyIndex is the index the recorded calls last mapped the VF to, over
// the real one (the driver's default without a sysfs root).
func (r *Recorder) PKeyIndex(ctx context.Context, vf VF) (string, error) {
	r.mu.Lock()
	calls, err := ReadCalls(r.path)
	r.mu.Unlock()
	if err != nil {
		return "", fmt.Errorf("VF admin record: %w", err)
	}
	for _, c := range slices.Backward(calls) {
		if c.PCIAddress == vf.PCIAddress && c.Op == opPKeyIndex {
			return c.Value, nil
		}
	}
	if r.SysfsRoot == "" {
		return defaultPKeyIndex, ctx.Err()
	}
	return IOV{r.SysfsRoot}.PKeyIndex(ctx, vf)
}

// opPKeyIndex is the recorded op of SetPKeyIndex.
const opPKeyIndex = "pKeyIndex"

func (r *Recorder) SetPKeyIndex(ctx context.Context, vf VF, idx string) error {
	return r.record(ctx, opPKeyIndex, vf, idx)
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
	pf, err := r.netdevs(op, vf)
	if err != nil {
		return err
	}
	line, err := json.Marshal(Call{Op: op, PF: pf, VF: vf.Index, PCIAddress: vf.PCIAddress, Value: value, Seed: r.seed})
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := atomicfile.AppendLine(r.path, line); err != nil {
		return fmt.Errorf("VF admin record: %w", err)
	}
	return nil
}

// netdevs is the PF's netdev the call goes through; for an MTU, the VF's
// netdev must be here too.
func (r *Recorder) netdevs(op string, vf VF) (string, error) {
	if r.SysfsRoot == "" {
		return vf.PF, nil
	}
	res := resolver{r.SysfsRoot}
	if op == "mtu" {
		if _, err := res.vfNetdev(vf.PCIAddress); err != nil {
			return "", err
		}
	}
	return res.pfNetdev(vf)
}

// Read is what the recorded calls last set on the VF, by its PCI
// address, over a new VF's settings (VLAN 0, spoof check on, trust off,
// no rates, link auto, an unset MAC); the MTU only once one was set.
func (r *Recorder) Read(ctx context.Context, vf VF) (vfsettings.Settings, error) {
	if err := ctx.Err(); err != nil {
		return vfsettings.Settings{}, err
	}
	if _, err := r.netdevs("read", vf); err != nil {
		return vfsettings.Settings{}, err
	}
	r.mu.Lock()
	calls, err := ReadCalls(r.path)
	r.mu.Unlock()
	if err != nil {
		return vfsettings.Settings{}, fmt.Errorf("VF admin record: %w", err)
	}
	s := newVF()
	for _, c := range calls {
		if c.PCIAddress == vf.PCIAddress {
			if err := replay(&s, c); err != nil {
				return vfsettings.Settings{}, fmt.Errorf("VF admin record: %s %q: %w", c.Op, c.Value, err)
			}
		}
	}
	return s, nil
}

// newVF is what the kernel gives a new VF.
func newVF() vfsettings.Settings {
	return vfsettings.Settings{VLAN: ptr(0), VLANQoS: ptr(0), VLANProto: vfsettings.ProtoDot1Q, SpoofChk: ptr(true),
		Trust: ptr(false), MinTxRate: ptr[uint64](0), MaxTxRate: ptr[uint64](0), LinkState: vfsettings.LinkAuto,
		MAC: vfsettings.UnsetMAC}
}

// replay sets on s what the call set, its value read back from its text.
func replay(s *vfsettings.Settings, c Call) error {
	var err error
	switch c.Op {
	case "vlan":
		var vlan, qos int
		var proto string
		_, err = fmt.Sscanf(c.Value, "%d qos %d proto %s", &vlan, &qos, &proto)
		s.VLAN, s.VLANQoS, s.VLANProto = &vlan, &qos, proto
	case "spoofchk":
		s.SpoofChk = ptr(c.Value == "on")
	case "trust":
		s.Trust = ptr(c.Value == "on")
	case "rate":
		var minRate, maxRate uint64
		_, err = fmt.Sscanf(c.Value, "%d-%d", &minRate, &maxRate)
		s.MinTxRate, s.MaxTxRate = &minRate, &maxRate
	case "linkState":
		s.LinkState = c.Value
	case "macAddress":
		s.MAC = c.Value
	case "mtu":
		var mtu int
		mtu, err = strconv.Atoi(c.Value)
		s.MTU = &mtu
	}
	return err
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
