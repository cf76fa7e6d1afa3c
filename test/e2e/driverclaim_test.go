package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// Issue 44's claims: one VF of sriov_fabric_a bound to vfio-pci for the
// claim, one on the driver it rests on.
const (
	dpdkDriverTemplate = "dpdk-driver-claim-template.yaml"
	kernelVFTemplate   = "kernel-vf-claim-template.yaml"
	fabricEnv          = "PCIDEVICE_INTEL_COM_SRIOV_FABRIC_A"
)

// driverPools is deploy/pools.yaml with sriov_fabric_a (the first
// E810-C's VFs 0-5) in DRA mode and its claims allowed vfio-pci; the
// sriov_dpdk pool before it matches every vfio-pci VF, and must not take
// one rebound for a claim.
const driverPools = `
tags:
  - name: fabric-a
    selectors: {pfNames: [enp59s0f0]}
resourceList:
  - resourceName: sriov_netdevice
    selectors: {vendors: ["8086"], pfNames: [enp62s0f0], drivers: [iavf]}
  - resourceName: sriov_dpdk
    selectors: {drivers: [vfio-pci]}
    allocationPolicy: spread
  - resourceName: sriov_fabric_a
    mode: dra
    claimDrivers: [vfio-pci]
    selectors: {models: [E810-C], tags: [fabric-a], drivers: [iavf, vfio-pci]}
  - resourceName: ib
    resourcePrefix: nvidia.com
    selectors: {vendors: ["15b3"], linkTypes: [infiniband], isRdma: true}
`

// TestDRADriverPerClaim (issue 44): one pool serves a DPDK pod and a
// kernel pod from VFs of the same PF: the DPDK pod's VF is bound to
// vfio-pci at prepare (its VFIO group in the container, no netdev on the
// node), the kernel pod's stays on iavf; once both go every VF is back
// on iavf and the pool whole. An agent killed between a VF's unbind and
// its bind leaves no half-bound VF: the next agent puts it back, and
// kubelet's retried prepare binds it again for the pod.
func TestDRADriverPerClaim(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original := e.defaultPools(t)
	e.waitUnheld(ctx, t, sriovResource, dpdkResource)
	e.usePools(ctx, t, []byte(driverPools))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.agentLogOnFailure(t)
	e.createTemplates(ctx, t, dpdkDriverTemplate, kernelVFTemplate)
	fabric := e.fabricVFs()
	e.waitFabricOn(ctx, t, fabric, "iavf")

	dpdk := e.startPod(ctx, t, e.draPod(t, "claim-pod.yaml", "driver-dpdk", "dpdk-from-kernel-pool"))
	kernel := e.startPod(ctx, t, e.draPod(t, "claim-pod.yaml", "driver-kernel", "kernel-from-kernel-pool"))
	dpdkVF := e.vfioFabricVF(ctx, t, dpdk.Name)
	kernelVF := e.podEnv(ctx, t, kernel.Name)[fabricEnv]
	if f, ok := e.c.Node().Device(kernelVF); !ok || f.Driver != "iavf" || f.Netdev == nil {
		t.Errorf("kernel pod %s got %s: %+v, want an iavf VF with its netdev", kernel.Name, kernelVF, f)
	}
	if d, _ := e.c.Node().Device(dpdkVF); d.PF != firstE810 {
		t.Errorf("DPDK pod's VF %s is of PF %s, want the first E810-C's, as the kernel pod's", dpdkVF, d.PF)
	}
	// Published on vfio-pci, it stays sriov_fabric_a's, untainted: the
	// DPDK pool listed before does not take it from the claim.
	e.slices(t, "the DPDK pod's VF published on vfio-pci in its pool", sliceDevice(dra.DeviceName(dpdkVF), "intel.com/sriov_fabric_a", "vfio-pci"))
	if err := e.deletePods(ctx, dpdk.Name, kernel.Name); err != nil {
		t.Fatal(err)
	}
	e.waitFabricOn(ctx, t, fabric, "iavf")
	e.slices(t, "the pool whole again", untaintedPool("intel.com/sriov_fabric_a", len(fabric)))

	t.Run("agent killed while rebinding", func(t *testing.T) { e.killedWhileRebinding(ctx, t, fabric) })
}

// firstE810 is the first E810-C's PCI address.
const firstE810 = "0000:3b:00.0"

// fabricVFs are the VFs of sriov_fabric_a in driverPools.
func (e *env) fabricVFs() []string {
	var out []string
	for _, f := range e.c.Node().Devices() {
		if f.PF == firstE810 && f.VFIndex <= 5 {
			out = append(out, f.Addr)
		}
	}
	return out
}

// waitFabricOn waits until every VF of vfs is on driver, with no
// driver_override ("" and the kernel's "(null)" alike).
func (e *env) waitFabricOn(ctx context.Context, t *testing.T, vfs []string, driver string) {
	t.Helper()
	sys := pcidriver.Sysfs{Root: e.c.Node().SysRoot()}
	mustPoll(ctx, t, fmt.Sprintf("VFs %v on %s", vfs, driver), func(context.Context) error {
		for _, addr := range vfs {
			b, err := sys.Read(addr)
			if err != nil {
				return err
			}
			if b != (pcidriver.Binding{Driver: driver}) {
				return fmt.Errorf("%s is %+v", addr, b)
			}
		}
		return nil
	})
}

// vfioFabricVF checks that the pod's one sriov_fabric_a VF is on
// vfio-pci with no netdev, its VFIO group a character device in the
// container and the VFIO entry in its _INFO variable, and returns it.
func (e *env) vfioFabricVF(ctx context.Context, t *testing.T, pod string) string {
	t.Helper()
	env := e.podEnv(ctx, t, pod)
	addr := env[fabricEnv]
	if !strings.Contains(env[fabricEnv+"_INFO"], `"vfio"`) {
		t.Errorf("pod %s: %s_INFO=%q, want its VFIO entry", pod, fabricEnv, env[fabricEnv+"_INFO"])
	}
	f, ok := e.c.Node().Device(addr)
	if !ok || f.Driver != "vfio-pci" || f.Netdev != nil {
		t.Fatalf("pod %s got %q: %+v, want a VF bound to vfio-pci for it", pod, addr, f)
	}
	p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkVFIONodes(t, pod, fmt.Sprintf("/proc/%d/root/dev/vfio", e.containerPID(ctx, t, p)), f.IOMMUGroup)
	return addr
}

// sliceDevice is a condition: the named device is published in pool, on
// driver, untainted.
func sliceDevice(name, pool, driver string) func(kubeapi.SliceDevices) bool {
	return func(d kubeapi.SliceDevices) bool {
		dev, ok := d[name]
		str := func(attr resourceapi.QualifiedName) string {
			if a, ok := dev.Attributes[attr]; ok && a.StringValue != nil {
				return *a.StringValue
			}
			return ""
		}
		return ok && str("pool") == pool && str("driver") == driver && len(dev.Taints) == 0
	}
}

// untaintedPool is a condition: the pool publishes n devices, none
// tainted.
func untaintedPool(pool string, n int) func(kubeapi.SliceDevices) bool {
	return func(d kubeapi.SliceDevices) bool {
		count := 0
		for _, dev := range d {
			if a, ok := dev.Attributes["pool"]; ok && a.StringValue != nil && *a.StringValue == pool {
				if len(dev.Taints) > 0 {
					return false
				}
				count++
			}
		}
		return count == n
	}
}

// killedWhileRebinding: with the kernel held, the agent writes a VF's
// unbind for the DPDK pod's claim and waits for it to show; it is killed
// there. The kernel then unbinds the VF, which the agent left with no
// driver. The next agent puts it back on iavf before kubelet's retried
// prepare binds it to vfio-pci again, and the pod runs with it.
func (e *env) killedWhileRebinding(ctx context.Context, t *testing.T, fabric []string) {
	unbind := filepath.Join(e.c.Node().SysRoot(), "bus/pci/drivers/iavf/unbind")
	// The tree's own empty write, which the kernel emulation ignores:
	// what the agent writes next is seen alone.
	if err := os.WriteFile(unbind, nil, 0o200); err != nil {
		t.Fatal(err)
	}
	resume, err := e.c.PauseVNodeKernel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resume() })
	pod := e.draPod(t, "claim-pod.yaml", "driver-killed", "dpdk-from-kernel-pool")
	e.cleanupPods(t, pod.Name)
	e.createPod(ctx, t, pod)
	var addr string
	mustPoll(ctx, t, "the agent's unbind of a VF for the claim", func(context.Context) error {
		data, err := os.ReadFile(unbind)
		if addr = strings.TrimSpace(string(data)); err != nil || !slices.Contains(fabric, addr) {
			return errors.Join(err, fmt.Errorf("unbind holds %q", addr))
		}
		return nil
	})
	if err := e.killAgent(ctx); err != nil {
		t.Fatal(err)
	}
	if err := resume(); err != nil {
		t.Fatal(err)
	}
	running, err := e.waitRunning(ctx, pod.Name, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.vfioFabricVF(ctx, t, running.Name); got != addr {
		t.Logf("the retried prepare's VF is %s, the killed one's %s", got, addr)
	}
	e.agentLogged(ctx, t, "claim whose prepare did not end dropped, its VFs back on their drivers", "")
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	e.waitFabricOn(ctx, t, fabric, "iavf")
}

// killAgent sends SIGKILL to hwnet-agent's container, through this
// cluster's containerd.
func (e *env) killAgent(ctx context.Context) error {
	name, err := runningAgent(ctx, e.client, e.c.NodeName())
	if err != nil {
		return err
	}
	agent, err := e.client.CoreV1().Pods(AgentNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if len(agent.Status.ContainerStatuses) == 0 {
		return fmt.Errorf("hwnet-agent pod %s has no container yet", name)
	}
	id := strings.TrimPrefix(agent.Status.ContainerStatuses[0].ContainerID, "containerd://")
	if _, err := Exec(ctx, e.c, nil, "ctr", "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		return fmt.Errorf("kill hwnet-agent %s: %w", id, err)
	}
	return nil
}
