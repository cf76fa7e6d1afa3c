package discovery

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Eswitch modes.
const (
	ModeLegacy    = "legacy"
	ModeSwitchdev = "switchdev"
)

// ESwitchReader reads a PF's eswitch mode. The kernel serves it through
// devlink, which not every kernel has; tests use an in-memory one.
type ESwitchReader interface {
	ESwitchMode(ctx context.Context, pciAddress string) (string, error)
}

// DevlinkESwitch reads eswitch modes from the kernel's devlink.
type DevlinkESwitch struct{}

// ESwitchMode asks devlink for the PF's eswitch mode.
func (DevlinkESwitch) ESwitchMode(_ context.Context, pciAddress string) (string, error) {
	dev, err := netlink.DevLinkGetDeviceByName("pci", pciAddress)
	if errors.Is(err, unix.ENOENT) {
		return "", fmt.Errorf("devlink: the kernel has no devlink netlink family: %w", err)
	}
	if err != nil {
		return "", fmt.Errorf("devlink: %w", err)
	}
	return dev.Attrs.Eswitch.Mode, nil
}

// readESwitch reads a PF's mode; without devlink a PF is in legacy mode,
// which is what the kernel boots every PF in.
func (a *assembler) readESwitch(ctx context.Context, address string) ESwitch {
	mode, err := a.opts.ESwitch.ESwitchMode(ctx, address)
	if err != nil {
		return ESwitch{Mode: ModeLegacy, Reason: fmt.Sprintf("assumed, the kernel's default (%v)", err)}
	}
	if mode == "" {
		return ESwitch{Mode: ModeLegacy, Reason: "assumed, the kernel's default (devlink reports no eswitch mode)"}
	}
	return ESwitch{Mode: mode}
}

// representors finds a switchdev PF's VF representors: the netdevs on the
// PF's switch (same phys_switch_id) whose phys_port_name is "pf<P>vf<N>".
func (a *assembler) representors(pf *scanned) map[int]string {
	if pf.fn.Netdev == nil {
		return nil
	}
	r := cwdReader()
	switchID, err := r.read(filepath.Join(pf.dir, "net", pf.fn.Netdev.Name, "phys_switch_id"))
	if err != nil || switchID == "" {
		return nil
	}
	if a.switches == nil {
		a.switches = readSwitchPorts(r, filepath.Join(a.opts.SysfsRoot, "class", "net"))
	}
	return a.switches[switchID]
}

// readSwitchPorts reads every netdev's switch ID and VF port once, for all
// switchdev PFs together: VF index to representor name, by switch ID.
func readSwitchPorts(r *attrReader, classNet string) map[string]map[int]string {
	switches := map[string]map[int]string{}
	names, err := r.dirNames(classNet)
	if err != nil {
		return switches
	}
	for _, n := range names {
		id, err := r.read(filepath.Join(classNet, n, "phys_switch_id"))
		if err != nil || id == "" {
			continue
		}
		port, err := r.read(filepath.Join(classNet, n, "phys_port_name"))
		vf, ok := parseVFPortName(port)
		if err != nil || !ok {
			continue
		}
		if switches[id] == nil {
			switches[id] = map[int]string{}
		}
		switches[id][vf] = n
	}
	return switches
}

// parseVFPortName returns N of a representor port name "pf0vfN" (or "c1pf0vfN").
func parseVFPortName(name string) (int, bool) {
	_, vf, ok := strings.Cut(name, "vf")
	if !ok || !strings.Contains(name, "pf") {
		return 0, false
	}
	if vf == "" || vf[0] < '0' || vf[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(vf)
	if err != nil {
		return 0, false
	}
	return n, true
}
