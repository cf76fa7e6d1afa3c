// Package devlink reads and sets a PF's eSwitch mode (legacy or
// switchdev) through devlink: the ESwitch interface, the kernel's devlink
// over netlink (Netlink), and a Record that sets nothing and keeps each
// set in a JSON-lines file instead, for nodes whose PFs have no devlink
// (the virtual node's) and for tests.
package devlink

import (
	"context"
	"fmt"
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

// ESwitch reads and sets a PF's eSwitch mode, by the PF's PCI address.
type ESwitch interface {
	ESwitchMode(ctx context.Context, pciAddress string) (string, error)
	SetESwitchMode(ctx context.Context, pciAddress, mode string) error
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
