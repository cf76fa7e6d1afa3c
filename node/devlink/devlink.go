// Package devlink reads and sets a PF's eSwitch mode (legacy or
// switchdev), and adds and deletes its scalable functions (SFs, ports of
// the switchdev eSwitch), through devlink: the ESwitch interface, the
// kernel's devlink over netlink (Netlink), and a Record that sets nothing
// and keeps each set in a JSON-lines file instead, for nodes whose PFs
// have no devlink (the virtual node's, whose kernel emulation enacts the
// record's SFs) and for tests.
package devlink

import (
	"context"
	"fmt"
	"math"
	"strings"
)

// The eSwitch modes hwnet sets.
const (
	// ModeLegacy is the mode the kernel boots every PF in: VFs are
	// switched by the NIC alone.
	ModeLegacy = "legacy"
	// ModeSwitchdev gives each VF a representor netdev on the host, which
	// OVS/OVN hardware offload needs.
	ModeSwitchdev = "switchdev"
)

// ESwitch reads and sets a PF's eSwitch mode, and adds and deletes its
// SFs, by the PF's PCI address. An SF is named by its sfnum, the number
// the admin gives `devlink port add` and mlx5 shows in the SF auxiliary
// device's sfnum file.
type ESwitch interface {
	ESwitchMode(ctx context.Context, pciAddress string) (string, error)
	SetESwitchMode(ctx context.Context, pciAddress, mode string) error
	// AddSF adds the SF and activates it, as `devlink port add
	// pci/PF flavour pcisf pfnum P sfnum N` then `devlink port function
	// set ... state active` do: its auxiliary device and netdev follow.
	AddSF(ctx context.Context, pciAddress string, sfnum int) error
	// DeleteSF deactivates the SF and deletes its port, as `devlink port
	// function set ... state inactive` then `devlink port del` do.
	DeleteSF(ctx context.Context, pciAddress string, sfnum int) error
}

// CheckSFNum refuses an sfnum devlink cannot carry (a u32).
func CheckSFNum(sfnum int) error {
	if sfnum < 0 || sfnum > math.MaxUint32 {
		return fmt.Errorf("sfnum %d: want 0-%d", sfnum, uint32(math.MaxUint32))
	}
	return nil
}

// CheckMode refuses a mode hwnet does not set.
func CheckMode(mode string) error {
	if mode != ModeLegacy && mode != ModeSwitchdev {
		return fmt.Errorf("eSwitch mode %q: want %q or %q", mode, ModeLegacy, ModeSwitchdev)
	}
	return nil
}

// New is the ESwitch spec names: "netlink", the kernel's devlink, or
// "record:PATH", a Record appending to PATH.
func New(spec string) (ESwitch, error) {
	switch kind, path, _ := strings.Cut(spec, ":"); {
	case spec == "netlink":
		return NewNetlink(), nil
	case kind == "record" && path != "":
		return NewRecord(path), nil
	}
	return nil, fmt.Errorf("devlink %q: want \"netlink\" or \"record:PATH\"", spec)
}
