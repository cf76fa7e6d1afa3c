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

// ErrGone marks a call on a PF, or a VF netdev, that is not there: a
// reset has nothing to put back (a PF's VFs go with it; a VF netdev that
// left gets its MTU again from its driver).
var ErrGone = errors.New("gone")

// VF names a VF for its PF's calls.
type VF struct {
	// PF is the PF's netdev.
	PF string
	// Index is the VF's index under the PF.
	Index int
	// PCIAddress is the VF's, by which its netdev is found for the MTU.
	PCIAddress string
}

// Admin sets one VF attribute per call.
type Admin interface {
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
		return NewRecorder(path), nil
	}
	return nil, fmt.Errorf("VF admin %q: want \"netlink\" or \"record:PATH\"", spec)
}

// Apply sets s on vf, one call per attribute s sets, in the order
// sriov-cni sets them: the MAC first, the MTU last. The first failing call
// ends it, its error naming the attribute; what was set before stays set
// for the caller's reset.
func Apply(ctx context.Context, a Admin, vf VF, s vfsettings.Settings) error {
	for _, step := range steps(a, vf, s) {
		if err := step.set(ctx); err != nil {
			return fmt.Errorf("VF %d of %s (%s): set %s: %w", vf.Index, vf.PF, vf.PCIAddress, step.name, err)
		}
	}
	return nil
}

// Reset puts back the defaults of what r set (vfsettings.Record.Defaults).
// Unlike Apply it makes every call even after one fails, so that one
// attribute the kernel refuses leaves no other one set, and returns the
// failures joined; a PF or netdev that is gone (ErrGone) is no failure.
func Reset(ctx context.Context, a Admin, r vfsettings.Record) error {
	vf := VF{PF: r.PF, Index: r.Index, PCIAddress: r.PCIAddress}
	var errs []string
	for _, step := range steps(a, vf, r.Defaults()) {
		if err := step.set(ctx); err != nil && !errors.Is(err, ErrGone) {
			errs = append(errs, fmt.Sprintf("reset %s: %v", step.name, err))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("VF %d of %s (%s): %s", vf.Index, vf.PF, vf.PCIAddress, strings.Join(errs, "; "))
	}
	return nil
}

type step struct {
	name string
	set  func(context.Context) error
}

func steps(a Admin, vf VF, s vfsettings.Settings) []step {
	var out []step
	add := func(name string, set func(context.Context) error) { out = append(out, step{name, set}) }
	if s.MAC != "" {
		add("macAddress", func(ctx context.Context) error { return a.SetMAC(ctx, vf, s.MAC) })
	}
	if s.SetsVLAN() {
		vlan, qos := deref(s.VLAN), deref(s.VLANQoS)
		proto := cmp.Or(s.VLANProto, vfsettings.ProtoDot1Q)
		add("vlan", func(ctx context.Context) error { return a.SetVLAN(ctx, vf, vlan, qos, proto) })
	}
	if s.SpoofChk != nil {
		add("spoofchk", func(ctx context.Context) error { return a.SetSpoofChk(ctx, vf, *s.SpoofChk) })
	}
	if s.Trust != nil {
		add("trust", func(ctx context.Context) error { return a.SetTrust(ctx, vf, *s.Trust) })
	}
	if s.SetsRate() {
		minRate, maxRate := deref(s.MinTxRate), deref(s.MaxTxRate)
		add("rate", func(ctx context.Context) error { return a.SetRate(ctx, vf, minRate, maxRate) })
	}
	if s.LinkState != "" {
		add("linkState", func(ctx context.Context) error { return a.SetLinkState(ctx, vf, s.LinkState) })
	}
	if s.MTU != nil {
		add("mtu", func(ctx context.Context) error { return a.SetMTU(ctx, vf, *s.MTU) })
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
