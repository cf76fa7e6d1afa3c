package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// layoutPF is a PF of the default virtual node: its PCI address, its
// netdev, the drivers its VFs have there by VF index, and the vfLayouts
// drivers value that binds them so.
type layoutPF struct {
	addr, name string
	vfs        []string
	drivers    string
}

// The PFs whose VF layout the tests change: the ConnectX-6, whose 4 VFs
// on mlx5_core are the nvidia.com/ib pool, and the second E810-C, whose
// VFs 0-5 are intel.com/sriov_netdevice and 6-7 half of
// intel.com/sriov_dpdk.
var (
	connectX6  = layoutPF{addr: "0000:41:00.0", name: "ibp65s0f0", vfs: slices.Repeat([]string{"mlx5_core"}, 4)}
	secondE810 = layoutPF{addr: "0000:3e:00.0", name: "enp62s0f0",
		vfs: append(slices.Repeat([]string{"iavf"}, 6), "vfio-pci", "vfio-pci"), drivers: `[{vfs: "6-7", driver: vfio-pci}]`}
)

// TestVFLayout (issue 34): the pools ConfigMap declares 8 VFs for the
// ConnectX-6, which has 4, with VFs 0-1 on vfio-pci. While a pod holds
// one of its VFs the change waits and says why (a Node Event naming the
// PF and the pod, the waiting metric) and the VFs stay as they are; once
// the pod is deleted the change is applied, and the node follows: 6
// InfiniBand VFs allocatable, 2 more DPDK ones in its capacity (and
// allocatable once the cluster's /dev has their VFIO groups, which
// the emulated kernel cannot make). No drain: the node stays
// schedulable and the holder is never evicted. The test ends with the
// node's 4 VFs and the default configuration back.
func TestVFLayout(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original := e.defaultPools(t)
	e.waitAllocatable(ctx, t, ibResource, 4)
	e.waitAllocatable(ctx, t, dpdkResource, 4)
	e.agentArgs(ctx, t, fmt.Sprintf("--metrics-addr=:%d", metricsPort))
	// Registered after agentArgs, so it runs first: the agent it restores
	// then finds the node's baseline.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.restoreVFs(ctx, t, original, connectX6)
	})

	holder := e.startPod(ctx, t, workloadPod("vflayout-holder", "", map[corev1.ResourceName]int64{ibResource: 1}))
	held := e.podEnv(ctx, t, holder.Name)["PCIDEVICE_NVIDIA_COM_IB"]
	e.switchPools(ctx, t, withVFLayout(original, connectX6, 8, `[{vfs: "0-1", driver: vfio-pci}]`))
	ev := e.waitNodeEvent(ctx, t, "VFLayoutWaiting", connectX6.name, "pod "+podNamespace+"/"+holder.Name)
	if !strings.Contains(ev, held) {
		t.Errorf("waiting Event %q does not name the held VF %s", ev, held)
	}
	e.waitMetric(ctx, t, fmt.Sprintf(`hwnet_vf_layout_waiting{pf=%q} 1`, connectX6.addr))
	if got := e.nodeVFs(connectX6.addr); len(got) != 4 {
		t.Fatalf("the PF has %d VFs while one is held, want its 4: %v", len(got), got)
	}

	deleted := time.Now()
	if err := e.deletePods(ctx, holder.Name); err != nil {
		t.Fatal(err)
	}
	e.waitAllocatable(ctx, t, ibResource, 6)
	t.Logf("allocatable %s=6 %.1fs after the holder's deletion", ibResource, time.Since(deleted).Seconds())
	e.waitCapacity(ctx, t, dpdkResource, 6)
	t.Log(e.waitNodeEvent(ctx, t, "VFLayoutApplied", connectX6.name, "8 VFs, VF 0 on vfio-pci, VF 1 on vfio-pci"))
	e.waitMetric(ctx, t, fmt.Sprintf(`hwnet_vf_layout_changes_total{pf=%q,result="applied"} 1`, connectX6.addr))
	vfs := e.nodeVFs(connectX6.addr)
	if len(vfs) != 8 || vfs[0] != "vfio-pci" || vfs[1] != "vfio-pci" || vfs[2] != "mlx5_core" {
		t.Errorf("the PF's VFs are on %v, want 8, 0-1 on vfio-pci, the rest on mlx5_core", vfs)
	}
	// The kernel's devtmpfs makes a new VFIO group's /dev/vfio/N as it
	// binds; the cluster's kernel emulation mirrors it into the cluster's
	// /dev after the write (SyncDevices only makes sure), and the agent,
	// which watches /dev/vfio, judges the VF healthy again.
	if err := e.c.SyncDevices(); err != nil {
		t.Fatal(err)
	}
	e.waitAllocatable(ctx, t, dpdkResource, 6)
	node, err := e.client.CoreV1().Nodes().Get(ctx, e.c.NodeName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable || len(node.Spec.Taints) > 0 {
		t.Errorf("node drained or tainted by the change: unschedulable %t, taints %v", node.Spec.Unschedulable, node.Spec.Taints)
	}
}

// withVFLayout is config with a vfLayouts entry giving the PF numVFs VFs
// bound as drivers says.
func withVFLayout(config []byte, pf layoutPF, numVFs int, drivers string) []byte {
	layout := fmt.Sprintf("\nvfLayouts:\n  - name: e2e-%s\n    selectors: {pfNames: [%s]}\n    numVfs: %d\n", pf.name, pf.name, numVFs)
	if drivers != "" {
		layout += "    drivers: " + drivers + "\n"
	}
	return append(append([]byte{}, config...), layout...)
}

// restoreVFs puts the PF's VFs back as the default virtual node has them,
// through a layout as a user would, then the default configuration. The
// cluster's device files are brought in line with the node's first: a VF
// bound to vfio-pci anew has its VFIO group device only then.
func (e *env) restoreVFs(ctx context.Context, t *testing.T, original []byte, pf layoutPF) {
	t.Helper()
	if !slices.Equal(e.nodeVFs(pf.addr), pf.vfs) {
		e.switchPools(ctx, t, withVFLayout(original, pf, len(pf.vfs), pf.drivers))
		e.waitNodeVFs(ctx, t, pf, pf.vfs)
	}
	if err := e.c.SyncDevices(); err != nil {
		t.Error(err)
	}
	e.usePools(ctx, t, original)
}

// waitCapacity waits until the node's capacity of res is want.
func (e *env) waitCapacity(ctx context.Context, t *testing.T, res corev1.ResourceName, want int64) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("node capacity %s=%d", res, want), func(ctx context.Context) error {
		node, err := e.client.CoreV1().Nodes().Get(ctx, e.c.NodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q := node.Status.Capacity[res]; q.Value() != want {
			return fmt.Errorf("capacity %s", q.String())
		}
		return nil
	})
}

// waitNodeVFs waits until the PF's VFs are on the drivers, by VF index.
func (e *env) waitNodeVFs(ctx context.Context, t *testing.T, pf layoutPF, drivers []string) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("PF %s's VFs on %v", pf.name, drivers), func(context.Context) error {
		if got := e.nodeVFs(pf.addr); !slices.Equal(got, drivers) {
			return fmt.Errorf("they are on %v", got)
		}
		return nil
	})
}

// nodeVFs are the drivers of the PF's VFs, by VF index, as the virtual
// node has them.
func (e *env) nodeVFs(pf string) []string {
	var out []string
	for _, f := range e.c.Node().Devices() {
		if f.PF == pf {
			out = append(out, f.Driver)
		}
	}
	return out
}

// waitNodeEvent waits for an Event on the node with the reason whose
// message has every one of parts, and returns the message.
func (e *env) waitNodeEvent(ctx context.Context, t *testing.T, reason string, parts ...string) string {
	t.Helper()
	var found string
	mustPoll(ctx, t, fmt.Sprintf("a Node Event %s with %q", reason, parts), func(ctx context.Context) error {
		// Every Event of the node, so that a timeout says what came
		// instead (a layout waiting, failing).
		list, err := e.client.CoreV1().Events("").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + e.c.NodeName()})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Reason == reason && containsAll(ev.Message, parts) {
				found = ev.Message
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s %s: %s", ev.LastTimestamp.UTC().Format(time.TimeOnly), ev.Reason, ev.Message))
		}
		return fmt.Errorf("the node's Events: %q", seen[max(0, len(seen)-12):])
	})
	return found
}
