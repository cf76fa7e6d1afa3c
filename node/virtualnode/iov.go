package virtualnode

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/hwdb"
)

// mlx4 virtualizes an InfiniBand port's P_Key table for its VFs
// (drivers/infiniband/hw/mlx4/sysfs.c), in its PF's RDMA device:
//
//	iov/ports/1/pkeys/<i>                 the physical table, "0x8001"
//	iov/<VF address>/ports/1/pkey_idx/<n> the physical index the VF's
//	                                      virtual index n maps to, or "none"
//
// The VF's own table (what its RDMA device's ports/1/pkeys shows) follows
// the mapping: its entry 0, which discovery reads, is the physical entry
// that pkey_idx/0 names. mlx5 has no such tree: its VFs get their P_Keys
// from the subnet manager.

const (
	// iovPKeyTableLen is the physical table's length the tree draws
	// (mlx4's is 128). Its last entry is the one "none" maps to: the
	// kernel takes an index below it (caps.pkey_table_len, one less
	// than the physical length in SR-IOV mode).
	iovPKeyTableLen = 16
	// iovVirtPKeys is how many virtual indices a VF's tree draws.
	iovVirtPKeys = 4
	// pkeyIdxNone is a virtual index mapped to no physical entry.
	pkeyIdxNone = "none"
	// invalidPKey is an unused table entry.
	invalidPKey = "0x0000"
	driverMLX4  = "mlx4_core"
)

// iovPKeys is the physical table an mlx4 InfiniBand PF's port is drawn
// with: the default partition and two more a test can give a VF.
var iovPKeys = []string{"0xffff", "0x8001", "0x8002"}

// hasIOV says whether f is an mlx4 InfiniBand PF whose RDMA device shows
// its VFs' P_Key mapping.
func (f *Function) hasIOV() bool {
	return f.SRIOV != nil && len(f.SRIOV.PKeys) > 0 && f.RDMA != nil
}

// iovDir is the PF's iov tree.
func (f *Function) iovDir() string { return f.SysPath + "/infiniband/" + f.RDMA.Name + "/iov" }

// physPKey is the physical table's entry that a VF's pkey_idx value idx
// ("" for the driver's default, 0) names: an unused entry for "none" or
// past the keys.
func (s *SRIOV) physPKey(idx string) string {
	i, err := strconv.Atoi(idx)
	if idx == "" {
		i, err = 0, nil
	}
	if err != nil || i < 0 || i >= len(s.PKeys) {
		return invalidPKey
	}
	return s.PKeys[i]
}

// checkPKeyIdx is what the kernel's store_port_pkey takes: "none" (any
// word starting "no"), or an index below the last physical entry. It
// returns the value as the file then reads.
func checkPKeyIdx(v string) (string, error) {
	if len(v) >= 2 && strings.EqualFold(v[:2], "no") {
		return pkeyIdxNone, nil
	}
	i, err := strconv.ParseInt(v, 0, 32)
	if err != nil || i < 0 || i >= iovPKeyTableLen-1 {
		return "", fmt.Errorf("P_Key index %q: want 0 to %d or none (EINVAL)", v, iovPKeyTableLen-2)
	}
	return strconv.FormatInt(i, 10), nil
}

// newIOVPKeys is the physical table of a new PF: mlx4 InfiniBand PFs
// alone have one.
func newIOVPKeys(m *hwdb.Model, linkType hwdb.LinkType) []string {
	if linkType != hwdb.InfiniBand || !slices.Contains(m.PFDrivers, driverMLX4) {
		return nil
	}
	return slices.Clone(iovPKeys)
}

// writeIOV writes an mlx4 PF's iov tree: its physical table (each VF's
// mapping is written with the VF).
func (l layout) writeIOV(pf *Function) {
	dir := pf.iovDir()
	l.dir(dir)
	l.dir(dir + "/ports")
	l.dir(dir + "/ports/1")
	l.dir(dir + "/ports/1/pkeys")
	for i := range iovPKeyTableLen {
		l.file(dir+"/ports/1/pkeys/"+strconv.Itoa(i), pf.SRIOV.physPKey(strconv.Itoa(i))+"\n")
	}
}

// writeVFIOV writes a VF's mapping in its PF's iov tree: virtual index 0
// to what the VF has (the driver's default, 0), the others to none.
func (l layout) writeVFIOV(pf, vf *Function) {
	dir := pf.iovDir() + "/" + vf.Addr
	l.dir(dir)
	l.dir(dir + "/ports")
	l.dir(dir + "/ports/1")
	l.dir(dir + "/ports/1/pkey_idx")
	for n := range iovVirtPKeys {
		idx := pkeyIdxNone
		if n == 0 {
			idx = vf.pkeyIdx()
		}
		l.file(dir+"/ports/1/pkey_idx/"+strconv.Itoa(n), idx+"\n")
	}
}

// pkeyIdx is what the VF's virtual index 0 maps to.
func (f *Function) pkeyIdx() string {
	if f.PKeyIdx == "" {
		return "0"
	}
	return f.PKeyIdx
}

// iovPF is the mlx4 PF whose iov tree maps vf's P_Keys, nil for none.
func (st *state) iovPF(vf *Function) *Function {
	if pf := st.function(vf.PF); pf != nil && pf.hasIOV() {
		return pf
	}
	return nil
}

// pkeyIdxDirs are the VFs' pkey_idx directories, each VF's under its
// PF's iov tree, relative to the tree's sys root.
func (n *Node) pkeyIdxDirs() []string {
	n.lock()
	defer n.mu.Unlock()
	var dirs []string
	for _, f := range n.st.Functions {
		if pf := n.st.iovPF(f); f.IsVF() && pf != nil {
			dirs = append(dirs, pf.iovDir()+"/"+f.Addr+"/ports/1/pkey_idx")
		}
	}
	return dirs
}

// writtenPKeyIdx enacts a write of v to pkey_idx/<name> in dir, a VF's
// mapping: the kernel takes an index below the last physical entry or
// "none", and the VF's own P_Key table follows its index 0. A value it
// refuses is written back over. Only index 0 is kept in the state; the
// others are checked and read back as written.
func (n *Node) writtenPKeyIdx(dir, name, v string) error {
	n.lock()
	defer n.mu.Unlock()
	vfAddr := path.Base(path.Dir(path.Dir(path.Dir(dir))))
	vf, err := n.function(vfAddr)
	if err != nil {
		return err
	}
	pf := n.st.iovPF(vf)
	if pf == nil {
		return fmt.Errorf("VF %s has no P_Key mapping", vfAddr)
	}
	l := n.layout()
	idx, err := checkPKeyIdx(v)
	if err != nil {
		if name == "0" {
			l.replace(dir+"/"+name, vf.pkeyIdx()+"\n")
		} else {
			l.replace(dir+"/"+name, pkeyIdxNone+"\n")
		}
		return errors.Join(err, l.Err())
	}
	if v == idx && (name != "0" || idx == vf.pkeyIdx()) {
		return nil
	}
	// The value is read back in the kernel's spelling before the VF's
	// P_Key shows it, and only when the write spelled it otherwise: a
	// writer that waits for the P_Key and writes again must not have its
	// next write replaced by this one's.
	if v != idx {
		l.replace(dir+"/"+name, idx+"\n")
	}
	if name == "0" {
		// Saved before the tree shows it: whoever sees the VF's new
		// P_Key and opens the node then finds it in the state too.
		mapPKeyIdx(pf, vf, idx)
		if err := n.save(); err != nil {
			return err
		}
		if vf.RDMA != nil {
			l.replace(vf.SysPath+"/infiniband/"+vf.RDMA.Name+"/ports/1/pkeys/0", vf.RDMA.PKey+"\n")
		}
	}
	return l.Err()
}

// mapPKeyIdx maps vf's virtual index 0 to idx in the state: its RDMA
// device's table entry 0 becomes the physical entry idx names.
func mapPKeyIdx(pf, vf *Function, idx string) {
	vf.PKeyIdx = idx
	if vf.RDMA != nil {
		vf.RDMA.PKey = pf.SRIOV.physPKey(idx)
	}
}
