package discovery

import (
	"fmt"
	"path"
	"path/filepath"
	"strconv"
	"strings"

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
func (s *functionScanner) readNetdev(sc *scanned) {
	names, err := s.r.dirNames("net")
	if err != nil {
		sc.problem(err)
		return
	}
	if len(names) == 0 {
		return
	}
	name := firstNetdev(sc, names)
	dir := path.Join("net", name)
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
		if nd.OperState, err = s.r.read(path.Join(dir, "operstate")); err != nil {
			sc.problem(fmt.Errorf("netdev %s: %w", name, err))
		}
		nd.Up = s.readNetdevFlags(sc, dir)&unix.IFF_UP != 0
	}
	// The kernel answers EINVAL for speed while the link is down.
	if v, err := s.r.readInt(path.Join(dir, "speed")); err == nil && v > 0 {
		nd.Speed = v
	}
	sc.fn.Netdev = nd
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
func (s *functionScanner) readRDMA(sc *scanned) {
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
	if v, err := s.r.read(path.Join(port, "state")); err == nil {
		rd.PortState = v
	}
	rd.CharDevices = s.verbsDevices(sc)
	sc.fn.RDMA = rd
}

// verbsDevices lists the function's /dev/infiniband/uverbsN devices.
func (s *functionScanner) verbsDevices(sc *scanned) []string {
	names, err := s.r.dirNames("infiniband_verbs")
	if err != nil {
		if !notExist(err) {
			sc.problem(err)
		}
		return nil
	}
	var paths []string
	for _, n := range names {
		p := filepath.Join(s.opts.DevRoot, "infiniband", n)
		if !exists(p) {
			sc.problem(fmt.Errorf("rdma: %s does not exist", p))
			continue
		}
		paths = append(paths, p)
	}
	return paths
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
