package discovery

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/hwdb"
)

// ARPHRD types of the netdev type attribute.
const (
	arphrdEther      = 1
	arphrdInfiniband = 32
)

// readNetdev reads the function's netdev from sysfs. MTU and operstate
// are read here too, and replaced by netlink's when the link is visible.
func (s *functionScanner) readNetdev(sc *scanned, hasNetDir bool) {
	dirs, err := s.netdevDirs(sc, hasNetDir)
	if err != nil {
		sc.problem(err)
		return
	}
	if len(dirs) > 1 {
		dirs = s.uplinksOnly(dirs)
	}
	switch len(dirs) {
	case 0:
	case 1:
		sc.fn.Netdev = s.readPort(sc, dirs[0])
	default:
		s.readPorts(sc, dirs)
	}
}

// readPorts reads the netdevs of a function with several ports, one per
// dev_port (mlx4 registers both ports of a ConnectX-3 on one function,
// dev_port 0 and 1), in dev_port order. Netdevs that share a port (an
// IPoIB parent and its P_Key children) are reported and the first by
// name kept.
func (s *functionScanner) readPorts(sc *scanned, dirs []string) {
	byPort := map[int]string{}
	var order []int
	for _, d := range dirs {
		port, err := s.r.readInt(path.Join(d, "dev_port"))
		if err != nil && !notExist(err) {
			sc.problem(fmt.Errorf("netdev %s: %w", path.Base(d), err))
		}
		if first, dup := byPort[port]; dup {
			sc.problem(fmt.Errorf("netdev %s shares dev_port %d with %s; the inventory shows %s", path.Base(d), port, path.Base(first), path.Base(first)))
			continue
		}
		byPort[port] = d
		order = append(order, port)
	}
	slices.Sort(order)
	if len(order) == 1 {
		sc.fn.Netdev = s.readPort(sc, byPort[order[0]])
		return
	}
	sc.fn.Ports = make([]Netdev, len(order))
	for i, port := range order {
		sc.fn.Ports[i] = *s.readPort(sc, byPort[port])
		sc.fn.Ports[i].Port = port
	}
	sc.fn.Netdev = &sc.fn.Ports[0]
}

// readPort reads one netdev directory.
func (s *functionScanner) readPort(sc *scanned, dir string) *Netdev {
	name := path.Base(dir)
	nd := &Netdev{Name: name, Speed: -1, StateFrom: "sysfs"}
	if addr, err := s.r.read(path.Join(dir, "address")); err != nil {
		sc.problem(err)
	} else if nd.HardwareAddr, nd.AddrLen, err = parseHardwareAddr(addr); err != nil {
		sc.problem(fmt.Errorf("netdev %s: %w", name, err))
	}
	nd.Type = arphrdType(nd.AddrLen)
	nd.Ifindex = s.readNetdevInt(sc, dir, "ifindex")
	// Once netlink's dump is in, the assembler takes MTU and operstate
	// from it; reading them here as well would be wasted.
	if !s.links.has(name, nd.Ifindex) {
		nd.MTU = s.readNetdevInt(sc, dir, "mtu")
		var err error
		if nd.OperState, err = s.r.read(path.Join(dir, "operstate")); err != nil {
			sc.problem(fmt.Errorf("netdev %s: %w", name, err))
		}
		nd.Up = s.readNetdevFlags(sc, dir)&unix.IFF_UP != 0
	}
	// The kernel answers EINVAL for speed while the link is down.
	if v, err := s.r.readInt(path.Join(dir, "speed")); err == nil && v > 0 {
		nd.Speed = v
	}
	nd.Wireless = s.isWireless(dir)
	return nd
}

// isWireless reports whether the netdev is a Wi-Fi interface: cfg80211
// links every wireless netdev to its phy (phy80211), and wireless
// extensions add a wireless directory. The PCI class cannot say it:
// ConnectX-3 reports 0x0280, "other network controller", as Wi-Fi cards do.
func (s *functionScanner) isWireless(dir string) bool {
	return s.r.exists(path.Join(dir, "phy80211")) || s.r.exists(path.Join(dir, "wireless"))
}

// netdevDirs lists the function's netdev directories relative to its own:
// net/<name> where the driver registers the netdev on the function itself,
// else those below its sub-devices (virtioN/net/<name>).
func (s *functionScanner) netdevDirs(sc *scanned, hasNetDir bool) ([]string, error) {
	if !hasNetDir {
		// A copy: the index is shared by the scanning workers.
		return slices.Sorted(slices.Values(s.netdevs.below(sc.fn.Address))), nil
	}
	names, err := s.r.dirNames("net")
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	dirs := make([]string, len(names))
	for i, name := range names {
		dirs[i] = path.Join("net", name)
	}
	return dirs, nil
}

// uplinksOnly drops the VF representors a switchdev PF's driver registers
// on the PF itself (mlx5 lists uplink and every representor in the PF's
// net/): they are the PF's switch ports, not its netdev. An uplink
// named by its port, p<P>, comes first.
func (s *functionScanner) uplinksOnly(dirs []string) []string {
	var uplinks, others []string
	for _, d := range dirs {
		name, err := s.r.read(path.Join(d, "phys_port_name"))
		switch {
		case err == nil && isRepresentor(name):
		case err == nil && isUplink(name):
			uplinks = append(uplinks, d)
		default:
			others = append(others, d)
		}
	}
	return append(uplinks, others...)
}

// isRepresentor reports whether a port name is a VF's or an SF's
// representor's.
func isRepresentor(portName string) bool {
	_, _, vf := parseVFPortName(portName)
	_, _, sf := parseSFPortName(portName)
	return vf || sf
}

func isUplink(portName string) bool {
	_, ok := parseUplinkPortName(portName)
	return ok
}

func (s *functionScanner) readNetdevInt(sc *scanned, dir, attr string) int {
	v, err := s.r.readInt(path.Join(dir, attr))
	if err != nil {
		sc.problem(fmt.Errorf("netdev %s: %w", path.Base(dir), err))
	}
	return v
}

// readNetdevFlags reads the interface flags, which sysfs writes in hex.
func (s *functionScanner) readNetdevFlags(sc *scanned, dir string) uint64 {
	v, err := s.r.read(path.Join(dir, "flags"))
	if err == nil {
		var flags uint64
		if flags, err = strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 32); err == nil {
			return flags
		}
	}
	sc.problem(fmt.Errorf("netdev %s: flags: %w", path.Base(dir), err))
	return 0
}

// arphrdType derives the link type from the address length, which saves
// reading the type attribute: a NIC's netdev is Ethernet with 6 bytes or
// IPoIB with 20.
func arphrdType(addrLen int) int {
	switch addrLen {
	case 6:
		return arphrdEther
	case 20:
		return arphrdInfiniband
	}
	return 0
}

// readRDMA reads the function's RDMA device and its first port.
func (s *functionScanner) readRDMA(sc *scanned, entries deviceEntries) {
	names, err := s.r.dirNames("infiniband")
	if err != nil || len(names) == 0 {
		if err != nil {
			sc.problem(err)
		}
		return
	}
	name := names[0]
	dir := path.Join("infiniband", name)
	rd := &RDMA{Device: name}
	if v, err := s.r.read(path.Join(dir, "node_guid")); err != nil {
		sc.problem(err)
	} else if rd.NodeGUID, err = parseGUID(v); err != nil {
		sc.problem(fmt.Errorf("rdma %s: %w", name, err))
	}
	port := path.Join(dir, "ports", "1")
	if v, err := s.r.read(path.Join(port, "gids", "0")); err == nil {
		if rd.PortGUID, err = parsePortGUID(v); err != nil {
			sc.problem(fmt.Errorf("rdma %s: %w", name, err))
		}
	}
	if v, err := s.r.read(path.Join(port, "link_layer")); err == nil {
		rd.LinkLayer = parseLinkLayer(v)
	}
	if rd.LinkLayer == hwdb.InfiniBand {
		if v, err := s.r.read(path.Join(port, "pkeys", "0")); err == nil {
			if rd.PKey, err = hwdb.ParsePKey(v); err != nil {
				sc.problem(fmt.Errorf("rdma %s: pkeys/0: %w", name, err))
			}
		}
	}
	if v, err := s.r.read(path.Join(port, "state")); err == nil {
		rd.PortState = v
	}
	rd.CharDevices = s.rdmaCharDevices(sc, entries)
	sc.fn.RDMA = rd
}

// rdmaCharDevices lists the device nodes a process opens to use the
// function's RDMA device: uverbsN for verbs; each port's umadN and issmN
// for management datagrams and the subnet manager, which InfiniBand and
// RoCE ports have but some VFs lack; and rdma_cm, the connection manager
// that all devices share, when the rdma_ucm module has made it. The
// kernel names the per-device nodes after the function's class devices.
// Whatever the function has belongs to the pod that gets the function, so
// a function with several RDMA devices or ports hands out all of them.
func (s *functionScanner) rdmaCharDevices(sc *scanned, entries deviceEntries) []string {
	var paths []string
	if entries.verbs {
		paths = s.appendDevNodes(sc, paths, "infiniband_verbs", "uverbs")
	}
	if entries.mad {
		paths = s.appendDevNodes(sc, paths, "infiniband_mad", "umad", "issm")
	}
	if cm, err := s.ib.node("rdma_cm"); err == nil {
		paths = append(paths, cm)
	}
	return paths
}

// appendDevNodes appends the /dev/infiniband nodes of the function's
// class devices under classDir, by kind in the order given, then by name.
// A class device whose node is missing is a problem: the pod could not
// open it.
func (s *functionScanner) appendDevNodes(sc *scanned, paths []string, classDir string, kinds ...string) []string {
	names, err := s.r.dirNames(classDir)
	if err != nil {
		sc.problem(err)
		return paths
	}
	slices.Sort(names)
	for _, kind := range kinds {
		for _, n := range names {
			if !strings.HasPrefix(n, kind) {
				continue
			}
			p, err := s.ib.node(n)
			if err != nil {
				sc.problem(err)
				continue
			}
			paths = append(paths, p)
		}
	}
	return paths
}

// devInfiniband is the listing of DevRoot/infiniband, read once a
// Discover by the first function that needs it: a map lookup per device
// node instead of a stat. It is safe for concurrent use.
type devInfiniband struct {
	dir   string
	once  sync.Once
	nodes map[string]bool
	err   error
}

func newDevInfiniband(devRoot string) *devInfiniband {
	return &devInfiniband{dir: filepath.Join(devRoot, "infiniband")}
}

// node returns the path of the device node name, or an error when it
// does not exist.
func (d *devInfiniband) node(name string) (string, error) {
	d.once.Do(d.list)
	path := filepath.Join(d.dir, name)
	if d.err != nil && !notExist(d.err) {
		return "", fmt.Errorf("rdma: %w", d.err)
	}
	if !d.nodes[name] {
		return "", fmt.Errorf("rdma: %s does not exist", path)
	}
	return path, nil
}

func (d *devInfiniband) list() {
	var names []string
	names, d.err = cwdReader().dirNames(d.dir)
	d.nodes = make(map[string]bool, len(names))
	for _, n := range names {
		d.nodes[n] = true
	}
}

func parseLinkLayer(v string) hwdb.LinkType {
	switch v {
	case "InfiniBand":
		return hwdb.InfiniBand
	case "Ethernet":
		return hwdb.Ethernet
	}
	return hwdb.LinkType(v)
}
