package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/test/cniplugins"
)

// pkeyPF is the e2e node's ConnectX-3 InfiniBand PF (mlx4), whose VFs'
// partition keys are mapped in its RDMA device's iov tree. Its VFs are in
// no pool of deploy/pools.yaml (nvidia.com/ib takes mlx5_core's):
// TestPKey_NADMappedReportedReset pools them.
const pkeyPF = "ibcx3"

// pkeyResource pools the ConnectX-3's VFs for TestPKey_NADMappedReportedReset.
const pkeyResource corev1.ResourceName = "nvidia.com/ib_mlx4"

const (
	pkeyPool = `
  - resourceName: ib_mlx4
    resourcePrefix: nvidia.com
    selectors: {drivers: [mlx4_core], linkTypes: [infiniband]}
`
	// pkeyPolicy is the cluster's VFSettingsPolicy with partition key
	// 0x8002 granted to namespace default.
	pkeyPolicy = `apiVersion: hwnet.io/v1alpha1
kind: VFSettingsPolicy
metadata: {name: hwnet}
spec:
  rules:
  - name: e2e-default
    namespaces: [default]
    allow: {macAddress: true, pKeys: ["0x8002"]}
`
	// pkeyNAD takes a ConnectX-3 VF through the test plugin playing
	// ib-sriov-cni, with ib-sriov-cni's pkey for hwnet to map.
	pkeyNAD = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: ib-pkey
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/resourceName: nvidia.com/ib_mlx4}
spec:
  config: '{"cniVersion": "1.0.0", "name": "ib-pkey", "plugins": [{"type": "hwnet-test-plugin", "personality": "ib-sriov",
    "capabilities": {"infinibandGUID": true}, "stateDir": "/var/lib/cni/hwnet-test-plugin", "pkey": "0x8002"}]}'
`
)

// TestPKey_NADMappedReportedReset (issue 45): a pod on a NAD whose pkey
// the VFSettingsPolicy grants gets its ConnectX-3 VF's P_Key index 0
// mapped to the PF's entry 0x8002 (its pkey_idx/0 in the node's sysfs, and
// the VF's own P_Key table), network-status shows the key under
// io.hwnet.vf, and once the pod is deleted pkey_idx/0 is back at 0.
func TestPKey_NADMappedReportedReset(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	if err := InstallCNIPlugin(ctx, e.c, filepath.Join(cniplugins.Dir(t), cniplugins.Recorder)); err != nil {
		t.Fatal(err)
	}
	e.applyUntilTestEnds(ctx, t, pkeyPolicy, readRepoFile(t, e.repo, VFSettingsPolicyFile))
	e.applyUntilTestEnds(ctx, t, pkeyNAD, nil)
	original := e.defaultPools(t)
	e.usePools(ctx, t, append(append([]byte{}, original...), pkeyPool...))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.agentLogOnFailure(t)
	// The agent usePools restarted read the policy at its start.
	e.cleanupPods(t, "ib-pkey")
	pod, err := e.runPod(ctx, workloadPod("ib-pkey", `[{"name": "ib-pkey"}]`, map[corev1.ResourceName]int64{pkeyResource: 1}), 1)
	if err != nil {
		t.Fatal(err)
	}
	vf := pciAddress(networkStatus(t, pod)[1])
	if got := pkeyOf(t, pod); got != "0x8002" {
		t.Errorf("network-status io.hwnet.vf pKey %q, want 0x8002", got)
	}
	// The kernel emulation makes the VF's own table follow the write.
	e.waitVFPKey(ctx, t, vf, "2", "0x8002")
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	e.waitVFPKey(ctx, t, vf, "0", "0xffff")
}

// waitVFPKey waits until the VF's pkey_idx/0 is idx and its own P_Key
// pkey.
func (e *env) waitVFPKey(ctx context.Context, t *testing.T, vf, idx, pkey string) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("VF %s at pkey_idx/0 %s, P_Key %s", vf, idx, pkey), func(context.Context) error {
		if i, k := e.vfPKey(t, vf); i != idx || k != pkey {
			return fmt.Errorf("pkey_idx/0 %q, P_Key %q", i, k)
		}
		return nil
	})
}

// pkeyOf is the partition key the pod's network-status reports for its
// first attachment, under io.hwnet.vf.
func pkeyOf(t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	var entries []struct {
		VF *vfsettings.Settings `json:"io.hwnet.vf"`
	}
	if err := json.Unmarshal([]byte(pod.Annotations["k8s.v1.cni.cncf.io/network-status"]), &entries); err != nil {
		t.Fatal(err)
	}
	if len(entries) < 2 || entries[1].VF == nil {
		return ""
	}
	return entries[1].VF.PKey
}

// vfPKey is the ConnectX-3 VF's pkey_idx/0 in its PF's iov tree, and its
// own P_Key table entry 0, as the node's sysfs shows them.
func (e *env) vfPKey(t *testing.T, vf string) (idx, pkey string) {
	t.Helper()
	node := e.c.Node()
	f, ok := node.Device(vf)
	if !ok || f.RDMA == nil {
		t.Fatalf("VF %s: %+v, want an mlx4 VF with its RDMA device", vf, f)
	}
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(node.SysRoot(), rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	pf, _ := node.Device(f.PF)
	return read("bus/pci/devices/" + pf.Addr + "/infiniband/" + pf.RDMA.Name + "/iov/" + vf + "/ports/1/pkey_idx/0"),
		read("class/infiniband/" + f.RDMA.Name + "/ports/1/pkeys/0")
}
