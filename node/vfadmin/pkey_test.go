package vfadmin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// ibNode has a ConnectX-3 InfiniBand PF (mlx4, with the iov tree), a
// ConnectX-6 one (mlx5, without) and an E810 (Ethernet), two VFs each.
const ibNode = `
name: pkeys
pfs:
  - {model: ConnectX-3, linkType: infiniband, vfs: 2}
  - {model: ConnectX-6, linkType: infiniband, vfs: 2}
  - {model: E810-C, vfs: 2}
`

// pkeyNode is the built ibNode, with its kernel emulation running, and
// VF 1 of each PF by model.
type pkeyNode struct {
	*virtualnode.Node
	vfs map[string]vfadmin.VF
}

func newPKeyNode(t *testing.T) pkeyNode {
	t.Helper()
	spec, err := virtualnode.ParseSpec([]byte(ibNode))
	if err != nil {
		t.Fatal(err)
	}
	n := pkeyNode{vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), false), map[string]vfadmin.VF{}}
	for _, f := range n.Devices() {
		if pf, ok := n.Device(f.PF); ok && f.VFIndex == 1 {
			n.vfs[f.Model] = vfadmin.VF{PF: pf.Ifname, PFPCIAddress: pf.Addr, Index: 1, PCIAddress: f.Addr}
		}
	}
	vnodetest.EnactWrites(t, n.Node)
	return n
}

// pkeyIdx0 reads the mlx4 VF's pkey_idx/0 and its own P_Key entry 0.
func (n pkeyNode) pkeyIdx0(t *testing.T) (idx, pkey string) {
	t.Helper()
	vf, _ := n.Device(n.vfs["ConnectX-3"].PCIAddress)
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(n.SysRoot(), rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	return read("class/infiniband/mlx4_0/iov/" + vf.Addr + "/ports/1/pkey_idx/0"), read("class/infiniband/" + vf.RDMA.Name + "/ports/1/pkeys/0")
}

func (n pkeyNode) waitPKey(t *testing.T, idx, pkey string) {
	t.Helper()
	kubeapi.WaitFor(t, "the mlx4 VF at pkey_idx "+idx+", P_Key "+pkey, func() bool {
		i, k := n.pkeyIdx0(t)
		return i == idx && k == pkey
	})
}

// TestPKey_VirtualNode: a VF's pKey is mapped through its mlx4 PF's iov
// tree, the physical index whose entry it is written to pkey_idx/0, and
// the VF's own P_Key follows; a reset writes back the index it had (an
// admin's 2, 0x8002), also from a record alone by a new Admin.
func TestPKey_VirtualNode(t *testing.T) {
	n := newPKeyNode(t)
	ctx := context.Background()
	a := vfadmin.Netlink{SysfsRoot: n.SysRoot()}
	vf := n.vfs["ConnectX-3"]
	n.waitPKey(t, "0", "0xffff")
	if err := a.SetPKeyIndex(ctx, vf, "2"); err != nil { // the admin's own
		t.Fatal(err)
	}
	n.waitPKey(t, "2", "0x8002")
	r, err := vfadmin.NewRecord(ctx, a, vf, vfsettings.Original{}, vfsettings.Settings{PKey: "0x8001"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.PriorPKeyIndex != "2" {
		t.Errorf("prior P_Key index %q, want 2", r.PriorPKeyIndex)
	}
	if err := vfadmin.Apply(ctx, a, vf, r.Settings, nil); err != nil {
		t.Fatal(err)
	}
	n.waitPKey(t, "1", "0x8001")
	if err := vfadmin.Reset(ctx, vfadmin.Netlink{SysfsRoot: n.SysRoot()}, *r); err != nil {
		t.Fatal(err)
	}
	n.waitPKey(t, "2", "0x8002")
}

// TestPKey_Refused: a key the PF's table does not hold, a VF of an mlx5
// PF (the subnet manager's keys) and an Ethernet VF are refused when the
// record is made, naming why, and nothing is written.
func TestPKey_Refused(t *testing.T) {
	n := newPKeyNode(t)
	ctx := context.Background()
	a := vfadmin.Netlink{SysfsRoot: n.SysRoot()}
	for _, tc := range []struct {
		model, pkey string
		want        error
		msg         string
	}{
		{"ConnectX-3", "0x8003", vfadmin.ErrUnknownPKey, `"pKey" 0x8003: unknown pkey 0x8003: the P_Key table of its PF 0000:`},
		{"ConnectX-6", "0x8001", vfadmin.ErrNoPKeys, `(driver "mlx5_core"): its PF maps no partition keys through the host`},
		{"E810-C", "0x8001", vfadmin.ErrNoPKeys, `(driver "ice"): its PF maps no partition keys`},
	} {
		_, err := vfadmin.NewRecord(ctx, a, n.vfs[tc.model], vfsettings.Original{}, vfsettings.Settings{PKey: tc.pkey}, nil)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s %s: %v, want %v with %q", tc.model, tc.pkey, err, tc.want, tc.msg)
		}
	}
	if idx, pkey := n.pkeyIdx0(t); idx != "0" || pkey != "0xffff" {
		t.Errorf("mlx4 VF at %s (%s) after refusals, want 0 (0xffff)", idx, pkey)
	}
}

// TestPKey_ResetGone: the reset of a VF that is gone (its PF's VFs
// disabled) has nothing to put back.
func TestPKey_ResetGone(t *testing.T) {
	n := newPKeyNode(t)
	ctx := context.Background()
	a := vfadmin.Netlink{SysfsRoot: n.SysRoot()}
	vf := n.vfs["ConnectX-3"]
	r, err := vfadmin.NewRecord(ctx, a, vf, vfsettings.Original{}, vfsettings.Settings{PKey: "0x8001"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetNumVFs(ctx, vf.PFPCIAddress, 0); err != nil {
		t.Fatal(err)
	}
	if err := vfadmin.Reset(ctx, a, *r); err != nil {
		t.Errorf("reset of a gone VF: %v, want nothing to do", err)
	}
}

// TestPKey_Recorder: the recorder looks the key up in the real table,
// records the index instead of writing it, and reads it back as the
// prior of the next record.
func TestPKey_Recorder(t *testing.T) {
	n := newPKeyNode(t)
	ctx := context.Background()
	rec := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	rec.SysfsRoot = n.SysRoot()
	vf := n.vfs["ConnectX-3"]
	r, err := vfadmin.NewRecord(ctx, rec, vf, vfsettings.Original{}, vfsettings.Settings{PKey: "0x8002"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := vfadmin.Apply(ctx, rec, vf, r.Settings, nil); err != nil {
		t.Fatal(err)
	}
	if idx, err := rec.PKeyIndex(ctx, vf); idx != "2" || err != nil {
		t.Errorf("recorded index %q (%v), want 2", idx, err)
	}
	if err := vfadmin.Reset(ctx, rec, *r); err != nil {
		t.Fatal(err)
	}
	calls, err := vfadmin.ReadCalls(rec.Path())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range calls {
		got = append(got, c.Op+" "+c.Value)
	}
	if want := []string{"pKeyIndex 2", "pKeyIndex 0"}; !slices.Equal(got, want) {
		t.Errorf("recorded %q, want %q", got, want)
	}
	if idx, pkey := n.pkeyIdx0(t); idx != "0" || pkey != "0xffff" {
		t.Errorf("the recorder wrote the VF: at %s (%s)", idx, pkey)
	}
}
