package discovery

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/node/devlink"
)

// Eswitch modes, devlink's.
const (
	ModeLegacy    = devlink.ModeLegacy
	ModeSwitchdev = devlink.ModeSwitchdev
)

// ESwitchReader reads a PF's eswitch mode. The kernel serves it through
// devlink (devlink.Netlink), which not every kernel has; a devlink.Record
// answers from its file, tests from memory.
type ESwitchReader interface {
	ESwitchMode(ctx context.Context, pciAddress string) (string, error)
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

// representors finds a switchdev PF's VF and SF representors: the
// netdevs on the PF's switch (same phys_switch_id) whose phys_port_name is
// "pf<P>vf<N>", by VF index, or "pf<P>sf<N>", by sfnum.
func (a *assembler) representors(pf *scanned) (vfs, sfs map[int]string) {
	if pf.fn.Netdev == nil {
		return nil, nil
	}
	r := cwdReader()
	uplink := filepath.Join(pf.dir, "net", pf.fn.Netdev.Name)
	switchID, err := r.read(filepath.Join(uplink, "phys_switch_id"))
	if err != nil || switchID == "" {
		return nil, nil
	}
	if a.switches == nil {
		a.switches = readSwitchPorts(r, filepath.Join(a.opts.SysfsRoot, "class", "net"))
	}
	port := pfPort(r, uplink, pf.fn.Address)
	vfs, sfs = map[int]string{}, map[int]string{}
	for k, name := range a.switches {
		switch {
		case k.switchID != switchID || k.pf != port:
		case k.sf:
			sfs[k.n] = name
		default:
			vfs[k.n] = name
		}
	}
	return vfs, sfs
}

// pfPort is the PF's port on its switch: P of its uplink's port name
// "p<P>", else its PCI function number, which is what mlx5 and ice name
// their ports by.
func pfPort(r *attrReader, uplink, address string) int {
	if name, err := r.read(filepath.Join(uplink, "phys_port_name")); err == nil {
		if p, ok := parseUplinkPortName(name); ok {
			return p
		}
	}
	return int(address[len(address)-1] - '0')
}

// switchPort names one VF or SF representor: multi-port NICs (mlx5
// dual-port) put both ports' representors on one switch ID, told apart by
// the PF port in their name, pf<P>vf<N> or pf<P>sf<N>. n is the VF's
// index or the SF's sfnum.
type switchPort struct {
	switchID string
	pf, n    int
	sf       bool
}

// readSwitchPorts reads every netdev's switch ID and port once, for all
// switchdev PFs together: the representor of each (switch, PF port, VF or
// SF).
func readSwitchPorts(r *attrReader, classNet string) map[switchPort]string {
	ports := map[switchPort]string{}
	names, err := r.dirNames(classNet)
	if err != nil {
		return ports
	}
	for _, n := range names {
		id, err := r.read(filepath.Join(classNet, n, "phys_switch_id"))
		if err != nil || id == "" {
			continue
		}
		name, err := r.read(filepath.Join(classNet, n, "phys_port_name"))
		if err != nil {
			continue
		}
		if pf, vf, ok := parseVFPortName(name); ok {
			ports[switchPort{switchID: id, pf: pf, n: vf}] = n
		} else if pf, sf, ok := parseSFPortName(name); ok {
			ports[switchPort{switchID: id, pf: pf, n: sf, sf: true}] = n
		}
	}
	return ports
}

// parseVFPortName returns P and N of a VF representor's port name:
// "pf<P>vf<N>" (mlx5, ice, bnxt), with a controller prefix "c<C>" on
// BlueField hosts, or "pf<P>vfr<N>" (older ice kernels).
func parseVFPortName(name string) (pf, vf int, ok bool) {
	return parsePortName(name, "vf")
}

// parseSFPortName returns P and N of an SF representor's port name,
// "pf<P>sf<N>" with N the sfnum (mlx5), and "c<C>" before it for an
// external host's SF.
func parseSFPortName(name string) (pf, sf int, ok bool) {
	return parsePortName(name, "sf")
}

// parsePortName parses "[c<C>]pf<P><kind><N>"; a VF's may be "vfr<N>".
func parsePortName(name, kind string) (pf, n int, ok bool) {
	c, rest, found := strings.Cut(name, "pf")
	if !found || (c != "" && (c[0] != 'c' || !isDigits(c[1:]))) {
		return 0, 0, false
	}
	p, v, found := strings.Cut(rest, kind)
	if kind == "vf" {
		v = strings.TrimPrefix(v, "r")
	}
	if !found || !isDigits(p) || !isDigits(v) {
		return 0, 0, false
	}
	pf, err1 := strconv.Atoi(p)
	n, err2 := strconv.Atoi(v)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pf, n, true
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// parseUplinkPortName returns P of an uplink's port name "p<P>".
func parseUplinkPortName(name string) (int, bool) {
	rest, found := strings.CutPrefix(name, "p")
	if !found || !isDigits(rest) {
		return 0, false
	}
	p, err := strconv.Atoi(rest)
	return p, err == nil
}
