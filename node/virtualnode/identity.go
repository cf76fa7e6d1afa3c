package virtualnode

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/hwnet-io/hwnet/hwdb"
)

// ARPHRD types of a netdev's type attribute.
const (
	arphrdEther      = 1
	arphrdInfiniBand = 32
)

// MTUs the drivers start with.
const (
	mtuEthernet = 1500
	mtuIPoIB    = 2044 // datagram mode on a 2048-byte IB MTU
)

// Roles in byte 3 of a deterministic MAC, which keep a function's MAC and
// its representor's apart.
const (
	roleFunction    = 0
	roleRepresentor = 1
	rolePort2       = 2
	rolePort2Peer   = 3
)

// mellanoxGUIDBase is the upper half of the GUIDs given to InfiniBand ports:
// NVIDIA's OUI 0c:42:a1 and a 0x03, as ConnectX cards use.
const mellanoxGUIDBase = 0x0c42a103 << 32

// attachDriver gives a function bound to a netdev driver its netdev, its
// representor and, if it has one, its RDMA device, and one bound to a UIO
// driver its UIO device; other functions lose them, as when the kernel
// unbinds a driver. A PF's SFs go for good: the kernel deletes them with
// the driver that made them.
func (st *state) attachDriver(f *Function) {
	f.Netdev, f.Representor, f.Port2, f.Port2Peer, f.RDMA, f.UIO, f.SFs = nil, nil, nil, nil, nil, nil, nil
	if isUIODriver(f.Driver) {
		f.UIO = &UIODevice{Number: st.Next.UIO}
		st.Next.UIO++
	}
	if !f.hasNetdevDriver() {
		return
	}
	rid, _ := parseRoutingID(f.Addr)
	f.Netdev = &Netdev{
		Name: f.Ifname, Index: st.allocIfindex(), Address: st.linkMAC(rid, roleFunction).String(),
		Type: arphrdEther, MTU: mtuEthernet, Up: true, OperState: "up",
	}
	if f.LinkType == hwdb.InfiniBand {
		f.Netdev.Address = ipoibAddress(st.portGUID(f, rid))
		f.Netdev.Type, f.Netdev.MTU = arphrdInfiniBand, mtuIPoIB
	}
	f.Representor = &Netdev{
		Name: representorName(rid), Index: st.allocIfindex(), Address: st.linkMAC(rid, roleRepresentor).String(),
		Type: arphrdEther, MTU: f.Netdev.MTU, Up: true, OperState: "up",
	}
	if f.DualPort {
		f.Port2 = &Netdev{Name: port2Name(f.Ifname), Index: st.allocIfindex(), Address: st.linkMAC(rid, rolePort2).String(),
			Type: f.Netdev.Type, MTU: f.Netdev.MTU, Up: true, OperState: "up"}
		if f.LinkType == hwdb.InfiniBand {
			f.Port2.Address = ipoibAddress(st.portGUID(f, rid) + 1)
		}
		f.Port2Peer = &Netdev{Name: representorName(rid) + "d1", Index: st.allocIfindex(), Address: st.linkMAC(rid, rolePort2Peer).String(),
			Type: arphrdEther, MTU: f.Netdev.MTU, Up: true, OperState: "up"}
	}
	if f.RDMACapable {
		f.RDMA = st.newRDMA(f, rid)
	}
}

func (st *state) allocIfindex() int {
	i := st.Next.Ifindex
	st.Next.Ifindex++
	return i
}

// defaultPKey is the default partition's full-membership key, which an
// InfiniBand port's P_Key table holds first unless the subnet manager (or,
// for a VF, its PF's driver) says otherwise.
const defaultPKey = "0xffff"

// function is the function at addr, nil for none ("" for a PF's PF).
func (st *state) function(addr string) *Function {
	for _, f := range st.Functions {
		if addr != "" && f.Addr == addr {
			return f
		}
	}
	return nil
}

// newRDMA makes the function's RDMA device, named as its driver names
// them: mlx5_N for mlx5_core, qibN for ib_qib, irdmaN for Intel's.
func (st *state) newRDMA(f *Function, rid routingID) *RDMADevice {
	prefix := "irdma"
	switch f.Driver {
	case "mlx5_core":
		prefix = "mlx5_"
	case driverMLX4:
		prefix = "mlx4_"
	case "ib_qib":
		prefix = "qib"
	}
	d := st.allocRDMA(prefix)
	guid := formatGUID(st.portGUID(f, rid)) // single-port devices share node and port GUID
	d.NodeGUID, d.PortGUID = guid, guid
	pfRID := rid
	if f.IsVF() {
		pfRID, _ = parseRoutingID(f.PF)
	}
	d.SysImageGUID = formatGUID(st.portGUID(f, pfRID))
	if f.LinkType == hwdb.InfiniBand {
		d.LinkLayer, d.LID, d.PKey = "InfiniBand", st.Next.LID, defaultPKey
		st.Next.LID++
		if pf := st.function(f.PF); pf != nil && pf.SRIOV != nil && pf.SRIOV.VFPKey != "" {
			d.PKey = pf.SRIOV.VFPKey
		}
		if pf := st.function(f.PF); pf != nil && pf.SRIOV != nil && len(pf.SRIOV.PKeys) > 0 {
			d.PKey = pf.SRIOV.physPKey(f.PKeyIdx)
		}
	}
	return d
}

// allocRDMA numbers a new RoCE device, named prefix<N>, and its verbs and
// MAD devices.
func (st *state) allocRDMA(prefix string) *RDMADevice {
	if st.Next.RDMA == nil {
		st.Next.RDMA = map[string]int{}
	}
	n := st.Next.RDMA[prefix]
	st.Next.RDMA[prefix]++
	d := &RDMADevice{Name: fmt.Sprintf("%s%d", prefix, n), Uverbs: st.Next.Uverbs, Umad: st.Next.Umad, LinkLayer: "Ethernet"}
	st.Next.Uverbs++
	st.Next.Umad++
	return d
}

// linkMAC is the locally administered MAC of a function's veth end or of
// its representor: 02:<seed>:<role>:<bus>:<devfn>.
func (st *state) linkMAC(rid routingID, role byte) net.HardwareAddr {
	s0, s1 := st.seed()
	return net.HardwareAddr{0x02, s0, s1, role, byte(rid >> 8), byte(rid)}
}

// portGUID is the port GUID of the function at rid: NVIDIA-style for
// InfiniBand, and for RoCE the EUI-64 of the function's MAC, as the kernel
// derives it.
func (st *state) portGUID(f *Function, rid routingID) uint64 {
	s0, s1 := st.seed()
	if f.LinkType == hwdb.InfiniBand {
		return mellanoxGUIDBase | uint64(s0)<<24 | uint64(s1)<<16 | uint64(rid)
	}
	return macGUID(st.linkMAC(rid, roleFunction))
}

// macGUID is the EUI-64 of a MAC, the GUID the kernel gives a RoCE port.
func macGUID(mac net.HardwareAddr) uint64 {
	eui := [8]byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
	return binary.BigEndian.Uint64(eui[:])
}

// formatGUID writes a GUID as sysfs does, "0c42:a103:0000:3b00".
func formatGUID(g uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
}

// ipoibAddress is an IPoIB hardware address: flags and queue pair number
// (00:00:10:87), then the port's GID, fe80::/64 and the port GUID.
func ipoibAddress(guid uint64) string {
	b := make(net.HardwareAddr, 20)
	copy(b, []byte{0x00, 0x00, 0x10, 0x87, 0xfe, 0x80})
	binary.BigEndian.PutUint64(b[12:], guid)
	return b.String()
}

// gid0 is a port's GID 0: the link-local prefix and the port GUID.
func gid0(portGUID string) string { return "fe80:0000:0000:0000:" + portGUID }

// representorName names the veth peer after the function's address, which
// keeps it unique and within 15 characters: r3b01.2 for 0000:3b:01.2.
func representorName(rid routingID) string {
	return fmt.Sprintf("r%02x%02x.%d", rid.bus(), rid.slot(), rid.fn())
}
