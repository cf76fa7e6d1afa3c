package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// dpdkCDISpec is the CDI spec of intel.com/sriov_dpdk with cdi on.
const dpdkCDISpec = "/var/run/cdi/hwnet-dp-intel.com_sriov_dpdk.json"

// TestDevicePluginCDI (issue 44): with cdi on, intel.com/sriov_dpdk's
// device plugin answers Allocate with CDI devices, and containerd applies
// the agent's spec: the pod's container has its VF's VFIO group and the
// variable only the spec sets (HWNET_DEVICE_<address>), besides the SR-IOV
// device plugin's variables from Allocate. Once the pool turns cdi off and
// the pod is gone, the spec goes.
func TestDevicePluginCDI(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	e.endsAtBaseline(ctx, t)
	e.defaultPoolsAtEnd(t)
	e.agentLogOnFailure(t)
	e.waitUnheld(ctx, t, dpdkResource)
	e.usePools(ctx, t, withCDI(t, e.defaultPools(t), "sriov_dpdk"))
	if out, err := Exec(ctx, e.c, nil, "cat", dpdkCDISpec); err != nil || !bytes.Contains(out, []byte(`"kind": "intel.com/sriov_dpdk"`)) {
		t.Fatalf("the pool's CDI spec %s: %v\n%s", dpdkCDISpec, err, out)
	}
	pod := e.startPod(ctx, t, workloadPod("cdi-dpdk", "", map[corev1.ResourceName]int64{dpdkResource: 1}))
	vf := e.vfioVFs(ctx, t, pod, 1, -1)[0]
	if got := e.podEnv(ctx, t, pod.Name)[handout.CDIEnvName(vf)]; got != vf {
		t.Errorf("pod %s: %s=%q, want %s: the CDI spec was not applied", pod.Name, handout.CDIEnvName(vf), got, vf)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	e.usePools(ctx, t, e.defaultPools(t))
	err := cluster.Poll(ctx, 2*time.Minute, "the CDI spec of a pool without cdi removed", func(ctx context.Context) error {
		out, err := Exec(ctx, e.c, nil, "find", "/var/run/cdi", "-name", "hwnet-dp-*")
		if err != nil {
			return err
		}
		if s := strings.TrimSpace(string(out)); s != "" {
			return fmt.Errorf("left: %s", s)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// withCDI turns cdi on for the named resources of config.
func withCDI(t *testing.T, config []byte, resources ...string) []byte {
	t.Helper()
	out := string(config)
	for _, r := range resources {
		entry := "  - resourceName: " + r
		i := strings.Index(out, entry)
		if i < 0 {
			t.Fatalf("no resource %s in the pools configuration", r)
		}
		end := i + strings.Index(out[i:], "\n") + 1
		out = out[:end] + "    cdi: true\n" + out[end:]
	}
	return []byte(out)
}
