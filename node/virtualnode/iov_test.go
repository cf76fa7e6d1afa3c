package virtualnode_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// cx3IB is a node with one ConnectX-3 InfiniBand PF (mlx4) and two VFs.
const cx3IB = `
name: cx3
pfs:
  - model: ConnectX-3
    linkType: infiniband
    vfs: 2
`

// TestIOVPKeys: an mlx4 InfiniBand PF's RDMA device has the iov tree:
// its physical P_Key table and, per VF, virtual index 0 mapped to
// physical index 0; a VF's own table entry 0 (what discovery reads)
// follows a write of pkey_idx/0, through a second Open too, and an index
// the kernel refuses is written back.
func TestIOVPKeys(t *testing.T) {
	n := build(t, mustParse(t, cx3IB), false)
	var pf, vf virtualnode.Function
	for _, f := range n.Devices() {
		if f.SRIOV != nil {
			pf = f
		}
	}
	vf = vfsOf(n, pf.Addr)[1]
	if pf.RDMA == nil || vf.RDMA == nil || pf.RDMA.Name != "mlx4_0" {
		t.Fatalf("PF RDMA %+v, VF RDMA %+v: want mlx4_0 and one for the VF", pf.RDMA, vf.RDMA)
	}
	sys := n.SysRoot()
	iov := filepath.Join(sys, "class/infiniband/mlx4_0/iov")
	for i, want := range map[string]string{"0": "0xffff", "1": "0x8001", "2": "0x8002", "3": "0x0000", "15": "0x0000"} {
		if got := readAttr(t, filepath.Join(iov, "ports/1/pkeys", i)); got != want {
			t.Errorf("physical pkeys/%s %q, want %q", i, got, want)
		}
	}
	idx0 := filepath.Join(iov, vf.Addr, "ports/1/pkey_idx/0")
	vfPKey := filepath.Join(sys, "class/infiniband", vf.RDMA.Name, "ports/1/pkeys/0")
	if a, b := readAttr(t, idx0), readAttr(t, filepath.Join(iov, vf.Addr, "ports/1/pkey_idx/1")); a != "0" || b != "none" || readAttr(t, vfPKey) != "0xffff" {
		t.Fatalf("VF pkey_idx/0 %q, /1 %q, its pkeys/0 %q: want 0, none, 0xffff", a, b, readAttr(t, vfPKey))
	}
	vnodetest.EnactWrites(t, n)
	write := func(path, v string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct{ write, idx, pkey string }{
		{"2", "2", "0x8002"},
		{"15", "2", "0x8002"}, // the "none" entry's own index: EINVAL
		{"-1", "2", "0x8002"},
		{"x", "2", "0x8002"},
		{"none", "none", "0x0000"},
		{"1", "1", "0x8001"},
	} {
		write(idx0, step.write)
		waitFor(t, "pkey_idx/0 "+step.idx+" after "+step.write+", the VF's pkeys/0 "+step.pkey, func() bool {
			return readAttr(t, idx0) == step.idx && readAttr(t, vfPKey) == step.pkey
		})
	}
	again, err := virtualnode.Open(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := again.Device(vf.Addr); got.PKeyIdx != "1" || got.RDMA.PKey != "0x8001" {
		t.Errorf("reopened VF: pkey_idx %q, P_Key %q, want 1 and 0x8001", got.PKeyIdx, got.RDMA.PKey)
	}
}

// TestIOVPKeys_VFPKeyRefused: a spec cannot give an mlx4 PF's VFs a
// default partition key: their P_Keys are mapped in its iov tree.
func TestIOVPKeys_VFPKeyRefused(t *testing.T) {
	_, err := virtualnode.Build(t.Context(), mustParse(t, cx3IB+"    vfPKey: \"0x8001\"\n"), vnodetest.OpenDB(t), virtualnode.Options{Dir: t.TempDir()})
	if err == nil {
		t.Fatal("built, want the vfPKey refused")
	}
}
