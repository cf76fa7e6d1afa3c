// Package vfadmin sets a VF's settings through its PF (api/vfsettings):
// the Admin interface, one method per kernel call, with a netlink
// implementation and a Recorder that writes every call to a JSON-lines
// file instead. The recorder serves tests and nodes whose PFs cannot take
// VF settings (the virtual node's PFs are veths).
package vfadmin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// ErrGone marks a call on a PF, or a VF netdev, that is not there and
// will not come back: a reset has nothing to put back (a PF's VFs go with
// it; a VF bound to a userspace driver gets its MTU again from its kernel
// driver).
var ErrGone = errors.New("gone")

// ErrNotBack marks a call on a PF whose driver has not made its netdev
// yet, or on a VF netdev not back in this network namespace (a pod's
// namespace is deleted asynchronously): a reset must be tried again
// later.
var ErrNotBack = errors.New("not back yet")

// VF names a VF for its PF's calls.
type VF struct {
	// PF is the PF's netdev as recorded: the one calls go through when
	// PFPCIAddress is "", else a name for messages.
	PF string
	// PFPCIAddress is the PF's PCI address, by which its netdev is found
	// at each call.
	PFPCIAddress string
	// Index is the VF's index under the PF.
	Index int
	// PCIAddress is the VF's, by which its netdev is found for the MTU.
	PCIAddress string
}

// Admin sets one VF attribute per call, and reads them all.
type Admin interface {
	// Read is the VF's settings as its PF reports them (VLAN, QoS and
	// protocol, spoof check, trust, rates, link state, MAC), with its
	// netdev's MTU when it has one here.
	Read(ctx context.Context, vf VF) (vfsettings.Settings, error)
	SetVLAN(ctx context.Context, vf VF, vlan, qos int, proto string) error
	SetSpoofChk(ctx context.Context, vf VF, on bool) error
	SetTrust(ctx context.Context, vf VF, on bool) error
	// SetRate sets the minimum and maximum transmit rates in Mbit/s, 0
	// for none.
	SetRate(ctx context.Context, vf VF, minRate, maxRate uint64) error
	SetLinkState(ctx context.Context, vf VF, state string) error
	SetMAC(ctx context.Context, vf VF, mac string) error
	// SetMTU sets the MTU of the VF's netdev.
	SetMTU(ctx context.Context, vf VF, mtu int) error
	PKeys
}

// PKeys maps an InfiniBand VF's partition key through its PF, as mlx4
// shows it in sysfs (IOV): not a netlink call.
type PKeys interface {
	// PKeyTable is the PF's physical P_Key table; ErrNoPKeys for a PF
	// that maps none.
	PKeyTable(ctx context.Context, vf VF) ([]string, error)
	// PKeyIndex is the physical index the VF's virtual index 0 maps to.
	PKeyIndex(ctx context.Context, vf VF) (string, error)
	// SetPKeyIndex maps the VF's virtual index 0 to physical index idx.
	SetPKeyIndex(ctx context.Context, vf VF, idx string) error
}

// New is the Admin a --vf-admin flag names: "netlink", or "record:PATH"
// for a Recorder appending to PATH. The netlink Admin finds a VF's netdev
// under sysfsRoot and its PF in the network namespace at netnsPath ("" for
// the caller's).
func New(spec, sysfsRoot, netnsPath string) (Admin, error) {
	switch kind, path, _ := strings.Cut(spec, ":"); {
	case spec == "netlink":
		return Netlink{SysfsRoot: cmp.Or(sysfsRoot, "/sys"), Netns: netnsPath}, nil
	case kind == "record" && path != "":
		r := NewRecorder(path)
		r.SysfsRoot = sysfsRoot
		return r, nil
	}
	return nil, fmt.Errorf("VF admin %q: want \"netlink\" or \"record:PATH\"", spec)
}

// Apply sets s on vf, one call per attribute s sets, in the order
// sriov-cni sets them: the MAC first, the MTU last. The first failing call
// ends it, its error naming the attribute as names does (nil: a claim
// configuration's); what was set before stays set for the caller's reset.
func Apply(ctx context.Context, a Admin, vf VF, s vfsettings.Settings, names vfsettings.Names) error {
	for _, step := range steps(a, vf, s, names) {
		if err := step.set(ctx); err != nil {
			return fmt.Errorf("VF %d of %s (%s): set %s: %w", vf.Index, vf.PF, vf.PCIAddress, step.name, err)
		}
	}
	return nil
}

// Reset puts back what the VF had before r's settings
// (vfsettings.Record.Restore, and the P_Key index it had). Unlike Apply it makes every call even
// after one fails, so that one attribute the kernel refuses leaves no
// other one set, and returns the failures joined; a PF or netdev that is
// gone (ErrGone) is no failure, one not back yet (ErrNotBack) is, for the
// caller to try again.
func Reset(ctx context.Context, a Admin, r vfsettings.Record) error {
	vf := Of(r)
	var errs []error
	for _, step := range append(steps(a, vf, r.Restore(), nil), resetPKey(a, r)...) {
		if err := step.set(ctx); err != nil && !errors.Is(err, ErrGone) {
			errs = append(errs, fmt.Errorf("reset %s: %w", step.name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("VF %d of %s (%s): %w", vf.Index, cmp.Or(vf.PFPCIAddress, vf.PF), vf.PCIAddress, errors.Join(errs...))
	}
	return nil
}

// Of is the VF a record names.
func Of(r vfsettings.Record) VF {
	return VF{PF: r.PF, PFPCIAddress: r.PFPCIAddress, Index: r.Index, PCIAddress: r.PCIAddress}
}

// NewRecord is the record of s about to be set on vf, with what the VF
// has now, read from its PF before the first change, as what a reset puts
// back; orig is its netdev's MAC and MTU. A VF whose settings cannot be
// read gets none set: they could not be put back. So does one whose PF
// cannot map s's partition key, or has not that key, the error naming it
// as names does.
func NewRecord(ctx context.Context, a Admin, vf VF, orig vfsettings.Original, s vfsettings.Settings, names vfsettings.Names) (*vfsettings.Record, error) {
	r := &vfsettings.Record{PF: vf.PF, PFPCIAddress: vf.PFPCIAddress, Index: vf.Index, PCIAddress: vf.PCIAddress,
		Settings: s, Original: orig, Prior: &vfsettings.Settings{}}
	var err error
	if s.PKey != "" {
		if r.PriorPKeyIndex, err = priorPKeyIndex(ctx, a, vf, s.PKey); err != nil {
			return nil, fmt.Errorf("VF %d of %s (%s): %s %s: %w", vf.Index, vf.PF, vf.PCIAddress, names.Quote("pKey"), s.PKey, err)
		}
	}
	// A partition key alone is no netlink setting: a PF that cannot
	// report its VFs' (the virtual node's veths) is not asked.
	if !s.OnlyPKey() {
		if *r.Prior, err = a.Read(ctx, vf); err != nil {
			return nil, fmt.Errorf("VF %d of %s (%s): read its settings, which a reset puts back: %w", vf.Index, vf.PF, vf.PCIAddress, err)
		}
	}
	if r.Prior.MTU == nil && orig.MTU != 0 {
		r.Prior.MTU = &orig.MTU
	}
	return r, nil
}

type step struct {
	name string
	set  func(context.Context) error
}

func steps(a Admin, vf VF, s vfsettings.Settings, names vfsettings.Names) []step {
	var out []step
	add := func(name string, set func(context.Context) error) { out = append(out, step{name, set}) }
	q := names.Quote
	if s.MAC != "" {
		add(q("macAddress"), func(ctx context.Context) error { return a.SetMAC(ctx, vf, s.MAC) })
	}
	if s.SetsVLAN() {
		vlan, qos := deref(s.VLAN), deref(s.VLANQoS)
		proto := cmp.Or(s.VLANProto, vfsettings.ProtoDot1Q)
		add(q("vlan"), func(ctx context.Context) error { return a.SetVLAN(ctx, vf, vlan, qos, proto) })
	}
	if s.SpoofChk != nil {
		add(q("spoofchk"), func(ctx context.Context) error { return a.SetSpoofChk(ctx, vf, *s.SpoofChk) })
	}
	if s.Trust != nil {
		add(q("trust"), func(ctx context.Context) error { return a.SetTrust(ctx, vf, *s.Trust) })
	}
	if s.SetsRate() {
		minRate, maxRate := deref(s.MinTxRate), deref(s.MaxTxRate)
		add(rateNames(s, q), func(ctx context.Context) error { return a.SetRate(ctx, vf, minRate, maxRate) })
	}
	if s.LinkState != "" {
		add(q("linkState"), func(ctx context.Context) error { return a.SetLinkState(ctx, vf, s.LinkState) })
	}
	if s.PKey != "" {
		add(q("pKey"), func(ctx context.Context) error { return setPKey(ctx, a, vf, s.PKey) })
	}
	if s.MTU != nil {
		add(q("mtu"), func(ctx context.Context) error { return a.SetMTU(ctx, vf, *s.MTU) })
	}
	return out
}

// rateNames are the rate limits s sets, quoted by q: one netlink call
// sets both.
func rateNames(s vfsettings.Settings, q func(string) string) string {
	switch {
	case s.MinTxRate == nil:
		return q("maxTxRate")
	case s.MaxTxRate == nil:
		return q("minTxRate")
	}
	return q("minTxRate") + " and " + q("maxTxRate")
}

// resetPKey is the step that maps the VF's virtual P_Key index 0 back to
// where it was, when r set a partition key.
func resetPKey(a Admin, r vfsettings.Record) []step {
	if r.Settings.PKey == "" {
		return nil
	}
	idx := cmp.Or(r.PriorPKeyIndex, defaultPKeyIndex)
	return []step{{`"pKey"`, func(ctx context.Context) error { return a.SetPKeyIndex(ctx, Of(r), idx) }}}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
