package delegate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// pkeyNAD asks ib-sriov-cni's partition key of host-device.
const pkeyNAD = `{"cniVersion":"1.0.0","plugins":[{"type":"host-device","pkey":"0x8002"}]}`

// TestVFSettings_NADPKey: a NAD's pkey maps an mlx4 VF's P_Key index 0
// to its PF's entry at ADD, is reported in network-status, and is put
// back at DEL; on an mlx5 VF, whose keys the subnet manager gives, the
// ADD fails naming why and writes nothing.
func TestVFSettings_NADPKey(t *testing.T) {
	spec := virtualnode.DefaultSpec()
	spec.PFs = append(spec.PFs, virtualnode.PFSpec{Model: "ConnectX-3", LinkType: "infiniband", VFs: 2})
	n := newTestNodeOf(t, "cni-pkey", spec)
	n.createNAD(podNS, "ib-pkey", sriovRes, pkeyNAD)
	n.withVFAdmin(vfadmin.Netlink{SysfsRoot: n.node.SysRoot(), Netns: "/run/netns/" + n.node.NetnsName()})
	var mlx4, mlx5 virtualnode.Function
	for _, f := range n.node.Devices() {
		switch {
		case f.PF == "":
		case f.Driver == "mlx4_core":
			mlx4 = f
		case f.Driver == "mlx5_core":
			mlx5 = f
		}
	}
	idx0 := filepath.Join(n.node.SysRoot(), "class/infiniband/mlx4_0/iov", mlx4.Addr, "ports/1/pkey_idx/0")
	read := func() string {
		b, err := os.ReadFile(idx0)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	ctx := context.Background()
	pod := n.createPod("ib-pkey", `[{"name":"ib-pkey"}]`, map[string][]string{sriovRes: {mlx4.Addr}})
	podNetns := n.podNetns("hwnet-ib-pkey")
	waitPod(t, n, podNS, "ib-pkey")
	if _, err := n.call(ctx, "ADD", "ib-pkey", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if got := read(); got != "2" {
		t.Errorf("pkey_idx/0 after ADD %q, want 2 (0x8002)", got)
	}
	if st := networkStatus(t, n, "ib-pkey"); len(st) != 2 || st[1].VF == nil || st[1].VF.PKey != "0x8002" {
		t.Errorf("network-status %+v, want pKey 0x8002 in entry 1", st)
	}
	if _, err := n.call(ctx, "DEL", "ib-pkey", podNetns, pod); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if got := read(); got != "0" {
		t.Errorf("pkey_idx/0 after DEL %q, want 0", got)
	}
	n.assertNoRecords(t)

	pod = n.createPod("ib-mlx5", `[{"name":"ib-pkey"}]`, map[string][]string{sriovRes: {mlx5.Addr}})
	waitPod(t, n, podNS, "ib-mlx5")
	_, err := n.call(ctx, "ADD", "ib-mlx5", n.podNetns("hwnet-ib-mlx5"), pod)
	if want := `(driver "mlx5_core"): its PF maps no partition keys through the host`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("ADD on an mlx5 VF: %v, want it refused with %q", err, want)
	}
	// The error names the key as the NAD writes it (ib-sriov-cni's), not
	// as a claim does.
	if want := `"pkey" 0x8002`; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "pKey") {
		t.Errorf("ADD on an mlx5 VF: %v, want the NAD's key named, %s", err, want)
	}
}
