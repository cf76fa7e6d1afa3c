package virtualnode

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"path"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/hwdb"
)

// SF is an mlx5 scalable function of a PF as built: an auxiliary device
// below the PF's device directory, bound to mlx5_core.sf, with a netdev and
// (on RDMA-capable models) an RDMA device of its own.
type SF struct {
	// Name is the auxiliary device's name, "mlx5_core.sf.<Index>".
	Name string `json:"name"`
	// SysPath is its directory relative to the sysfs root, below its PF's:
	// "devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.0".
	SysPath string `json:"sysPath"`
	// Index is N of the name. The kernel numbers mlx5's auxiliary devices
	// node-wide (mlx5_adev_idx_alloc), PFs and VFs included; the tree
	// numbers only the SFs, from 0 in build order.
	Index int `json:"index"`
	// Num is the sfnum the admin gave `devlink port add`; the tree gives
	// each PF's SFs 88, 89, ... (88 as in the kernel's examples).
	Num int `json:"num"`
	// Netdev is the SF's netdev, enp<bus>s0f<fn>s<sfnum> as systemd names
	// it, and Representor the other end of its veth pair, which plays the
	// SF's switchdev representor (phys_port_name pf<P>sf<sfnum>).
	Netdev      *Netdev `json:"netdev"`
	Representor *Netdev `json:"representor"`
	// RDMA is the SF's RDMA device, mlx5_<N>, on RDMA-capable models.
	RDMA *RDMADevice `json:"rdma,omitempty"`
}

// Auxiliary drivers of an SF and of the devices below it: the auxiliary
// bus names a driver <module>.<name>.
const (
	sfDriver     = "mlx5_core.sf"
	sfEthDriver  = "mlx5_core.eth"
	sfRDMADriver = "mlx5_ib.rdma"
)

// Limits of the SFs a spec draws.
const (
	firstSFNum = 88
	// maxSFsPerPF keeps sfnums within what sfMAC tells apart (12 bits)
	// and SF netdev names within 15 characters; BlueField-3's 1000 fit.
	maxSFsPerPF = 2048
)

// checkSFs refuses SFs the model cannot carry: none on a model without
// them, more than its maxSFs, and none on an InfiniBand port, as SFs are
// ports of the switchdev eswitch, which only Ethernet ports have.
func checkSFs(ps *PFSpec, m *hwdb.Model) error {
	var err error
	switch {
	case ps.SFs == 0:
	case m.MaxSFs == 0:
		err = fmt.Errorf("%d scalable functions, but model %s has none (maxSFs 0)", ps.SFs, m.Name)
	case ps.SFs > m.MaxSFs:
		err = fmt.Errorf("%d is more than model %s carries (maxSFs %d)", ps.SFs, m.Name, m.MaxSFs)
	case cmp.Or(ps.LinkType, m.LinkTypes[0]) == hwdb.InfiniBand:
		err = errors.New("scalable functions are ports of the switchdev eswitch, which an InfiniBand port has none of")
	}
	if err != nil {
		return &SpecError{Field: "sfs", Err: err}
	}
	return nil
}

// addSFs gives the PF n SFs, rejecting a netdev name already taken.
func (p *planner) addSFs(pf *Function, n int) error {
	for i := range n {
		sf := p.st.newSF(pf, firstSFNum+i)
		if other, ok := p.names[sf.Netdev.Name]; ok {
			return &SpecError{Field: "sfs", Err: fmt.Errorf("%s's netdev name %q is already the netdev name of %s", sf.Name, sf.Netdev.Name, other)}
		}
		p.names[sf.Netdev.Name] = sf.Name
		pf.SFs = append(pf.SFs, sf)
	}
	return nil
}

// newSF makes the PF's SF with this sfnum, its netdev up.
func (st *state) newSF(pf *Function, num int) *SF {
	index := st.Next.AuxIndex
	st.Next.AuxIndex++
	name := sfDriver + "." + strconv.Itoa(index)
	rid, _ := parseRoutingID(pf.Addr)
	sf := &SF{Name: name, SysPath: pf.SysPath + "/" + name, Index: index, Num: num}
	sf.Netdev = &Netdev{
		Name: fmt.Sprintf("enp%ds%df%ds%d", rid.bus(), rid.slot(), rid.fn(), num), Index: st.allocIfindex(),
		Address: sfMAC(st, rid, num, roleFunction).String(), Type: arphrdEther, MTU: mtuEthernet, Up: true, OperState: "up",
	}
	sf.Representor = &Netdev{
		Name: fmt.Sprintf("%ss%d", representorName(rid), num), Index: st.allocIfindex(),
		Address: sfMAC(st, rid, num, roleRepresentor).String(), Type: arphrdEther, MTU: mtuEthernet, Up: true, OperState: "up",
	}
	if pf.RDMACapable {
		sf.RDMA = st.newSFRDMA(pf, sf, rid)
	}
	return sf
}

// newSFRDMA makes the SF's RDMA device: mlx5 names it as the PF's, and
// gives it a RoCE GUID from the SF's own MAC beside its PF's system image
// GUID (node_guid 0000:00ff:fe00:8888 for MAC 00:00:00:00:88:88 in the
// kernel's example).
func (st *state) newSFRDMA(pf *Function, sf *SF, rid routingID) *RDMADevice {
	d := st.allocRDMA("mlx5_")
	guid := formatGUID(macGUID(sfMAC(st, rid, sf.Num, roleFunction)))
	d.NodeGUID, d.PortGUID = guid, guid
	d.SysImageGUID = formatGUID(st.portGUID(pf, rid))
	return d
}

// sfMAC is the locally administered MAC of an SF's veth end (role
// roleFunction) or its representor's (roleRepresentor):
// 02:<seed>:<8 | representor | sfnum's high 4 bits>:<PF bus>:<sfnum's low
// byte>. Byte 3 of 0x80 and above keeps it apart from linkMAC's roles;
// the bus alone names the PF, as each PF has a bus of its own.
func sfMAC(st *state, pf routingID, num int, role byte) net.HardwareAddr {
	s0, s1 := st.seed()
	b3 := byte(0x80 | num>>8&0x0f)
	if role == roleRepresentor {
		b3 |= 0x40
	}
	return net.HardwareAddr{0x02, s0, s1, b3, byte(pf.bus()), byte(num)}
}

// clone returns a deep copy.
func (sf *SF) clone() *SF {
	c := *sf
	c.Netdev = clonePtr(sf.Netdev)
	c.Representor = clonePtr(sf.Representor)
	c.RDMA = clonePtr(sf.RDMA)
	return &c
}

// auxChildren are the auxiliary devices mlx5 makes below an SF, each
// named after the SF's index: mlx5_core.eth.<N>, whose driver makes the
// netdev, and mlx5_core.rdma.<N>, whose driver makes the RDMA device.
func (sf *SF) auxChildren() map[string]string {
	n := strconv.Itoa(sf.Index)
	children := map[string]string{"mlx5_core.eth." + n: sfEthDriver}
	if sf.RDMA != nil {
		children["mlx5_core.rdma."+n] = sfRDMADriver
	}
	return children
}

// writeSF writes the SF's directory below its PF's and every link to it:
// sfnum, its driver and bus, the auxiliary devices below it, its netdev
// with its representor, and its RDMA device.
func (l layout) writeSF(pf *Function, sf *SF) {
	l.dir(sf.SysPath)
	// Whole at once, as kernfs makes it: a reader listing the PF's SFs
	// while this one comes must not read an empty sfnum.
	l.replace(sf.SysPath+"/sfnum", strconv.Itoa(sf.Num)+"\n")
	l.writeAuxDevice(sf.SysPath, sfDriver)
	for name, driver := range sf.auxChildren() {
		l.dir(sf.SysPath + "/" + name)
		l.writeAuxDevice(sf.SysPath+"/"+name, driver)
	}
	dir := sf.SysPath + "/net/" + sf.Netdev.Name
	l.dir(sf.SysPath + "/net")
	l.dir(dir)
	l.writeNetdevAttrs(dir, sf.Netdev, pf.Speed)
	l.writePortLinks(sf.SysPath, dir, sf.Netdev)
	portName := ""
	if l.st.switchID(pf) != "" {
		portName = fmt.Sprintf("pf%dsf%d", pf.Port, sf.Num)
	}
	l.writePeer(sf.Representor, sf.Netdev.Index, l.st.switchID(pf), portName)
	if sf.RDMA != nil {
		l.writeRDMA(rdmaHolder{dir: sf.SysPath, rdma: sf.RDMA, netdev: sf.Netdev, speed: pf.Speed})
	}
}

// writeAuxDevice writes what the auxiliary bus gives the device at dir:
// uevent, its bus and driver links and the bus's and driver's links to it.
func (l layout) writeAuxDevice(dir, driver string) {
	name := path.Base(dir)
	// The modalias is the name less its index: auxiliary:mlx5_core.sf.
	l.file(dir+"/uevent", fmt.Sprintf("DRIVER=%s\nMODALIAS=auxiliary:%s\n", driver, name[:strings.LastIndexByte(name, '.')]))
	l.link(dir+"/subsystem", "bus/auxiliary")
	l.link("bus/auxiliary/devices/"+name, dir)
	drv := "bus/auxiliary/drivers/" + driver
	l.ensureDriver(drv)
	l.link(dir+"/driver", drv)
	l.link(drv+"/"+name, dir)
}

// removeSF undoes writeSF, as deleting the SF's devlink port does.
func (l layout) removeSF(sf *SF) {
	l.remove("class/net/" + sf.Netdev.Name)
	l.remove("class/net/" + sf.Representor.Name)
	l.remove(representorDir(sf.Representor))
	if sf.RDMA != nil {
		l.removeRDMA(rdmaHolder{dir: sf.SysPath, rdma: sf.RDMA, netdev: sf.Netdev})
	}
	l.removeAuxDevice(sf.Name, sfDriver)
	for name, driver := range sf.auxChildren() {
		l.removeAuxDevice(name, driver)
	}
	l.remove(sf.SysPath)
}

func (l layout) removeAuxDevice(name, driver string) {
	l.remove("bus/auxiliary/devices/" + name)
	l.remove("bus/auxiliary/drivers/" + driver + "/" + name)
}
