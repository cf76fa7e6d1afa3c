package dra_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// newIBTestNode is the default virtual node with a ConnectX-3
// InfiniBand PF (mlx4) beside its ConnectX-6 (mlx5), both in the DRA pool
// ib, and the address of VF 1 of the mlx4 PF and of the mlx5 one.
func newIBTestNode(t *testing.T) (n *testNode, mlx4VF, mlx5VF string) {
	t.Helper()
	spec := virtualnode.DefaultSpec()
	spec.PFs = append(spec.PFs, virtualnode.PFSpec{Model: "ConnectX-3", LinkType: "infiniband", VFs: 2})
	n = newTestNodeOf(t, spec, poolsConfig)
	for _, f := range n.node.Devices() {
		switch {
		case f.VFIndex != 1 || f.PF == "":
		case f.Driver == "mlx4_core":
			mlx4VF = f.Addr
		case f.Driver == "mlx5_core":
			mlx5VF = f.Addr
		}
	}
	if mlx4VF == "" || mlx5VF == "" {
		t.Fatalf("no mlx4 (%q) or mlx5 (%q) VF 1", mlx4VF, mlx5VF)
	}
	return n, mlx4VF, mlx5VF
}

// deviceName is a PCI function's DRA device name.
func deviceName(addr string) string {
	return "pci-" + strings.NewReplacer(":", "-", ".", "-").Replace(addr)
}

// pkeyIdx0 is what the mlx4 VF's virtual P_Key index 0 maps to.
func pkeyIdx0(t *testing.T, n *testNode, vf string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(n.node.SysRoot(), "class/infiniband/mlx4_0/iov", vf, "ports/1/pkey_idx/0"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestVFSettings_PKey: a claim's vf.pKey maps an mlx4 VF's P_Key index 0
// to the PF's entry at prepare, is reported to the CNI side, and is put
// back at unprepare by a restarted driver from the checkpoint alone.
func TestVFSettings_PKey(t *testing.T) {
	n, vf, _ := newIBTestNode(t)
	dir := t.TempDir()
	admin := vfadmin.Netlink{SysfsRoot: n.node.SysRoot()}
	p := newPreparer(t, n, dir, admin)
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	if res := p.prepare(t, forPod(vfConfig(claim("k", alloc("ib", deviceName(vf))), `{"pKey":"0x8002"}`), "pod-k")); res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := pkeyIdx0(t, n, vf); got != "2" {
		t.Errorf("pkey_idx/0 after prepare %q, want 2 (0x8002)", got)
	}
	devs, err := p.drv.PodDevices(context.Background(), netclaim.Pod{UID: "pod-k"})
	if err != nil || len(devs) != 1 || devs[0].VF == nil || devs[0].VF.PKey != "0x8002" {
		t.Fatalf("PodDevices %+v (%v), want pKey 0x8002", devs, err)
	}
	if err := newPreparer(t, n, dir, admin).unprepare(t, "k"); err != nil {
		t.Fatal(err)
	}
	if got := pkeyIdx0(t, n, vf); got != "0" {
		t.Errorf("pkey_idx/0 after unprepare %q, want 0", got)
	}
}

// TestVFSettings_PKeyRefused: a key the mlx4 PF's table lacks, an mlx5 VF
// (its keys are the subnet manager's) and an Ethernet VF fail the prepare
// naming why, and nothing is written.
func TestVFSettings_PKeyRefused(t *testing.T) {
	n, mlx4VF, mlx5VF := newIBTestNode(t)
	for _, tc := range []struct {
		name, pool, vf, pkey, want string
	}{
		{"unknown", "ib", mlx4VF, "0x8003", `"pKey" 0x8003: unknown pkey 0x8003: the P_Key table of its PF`},
		{"mlx5", "ib", mlx5VF, "0x8001", `(driver "mlx5_core"): its PF maps no partition keys through the host`},
		{"ethernet", "vfs", "0000:3b:01.1", "0x8001", `(driver "ice"): its PF maps no partition keys through the host`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			p := newPreparer(t, n, dir, vfadmin.Netlink{SysfsRoot: n.node.SysRoot()})
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			c := vfConfig(claim("r-"+tc.name, alloc(tc.pool, deviceName(tc.vf))), `{"pKey":"`+tc.pkey+`"}`)
			if res := p.prepare(t, c); res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", res.Err, tc.want)
			}
			if got := pkeyIdx0(t, n, mlx4VF); got != "0" {
				t.Errorf("mlx4 VF's pkey_idx/0 %q, want 0", got)
			}
		})
	}
}
