package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// healthReact bounds how long a VF's health takes from its link to the
// pod's status: the agent's verdict, the front end, kubelet's status sync.
const healthReact = 30 * time.Second

// TestDeviceHealthInPodStatus (issue 34, KEP-4680): a VF loses its carrier
// under a running pod; the pod's status.containerStatuses[].
// allocatedResourcesStatus shows it Unhealthy, and Healthy again once the
// carrier is back. Through the device plugin (kubelet takes the health
// from ListAndWatch and carries no message) and through a DRA claim (the
// driver's health stream, with the reason as the message, and the device
// tainted in the slices as before). The node ends as it began.
func TestDeviceHealthInPodStatus(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original, err := os.ReadFile(filepath.Join(e.repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	e.waitUnheld(ctx, t, sriovResource, dpdkResource)
	before := e.mustSnapshot(ctx, t)
	t.Run("device plugin", func(t *testing.T) { e.devicePluginHealth(ctx, t) })
	e.usePools(ctx, t, draPoolsConfig(t, e.repo))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
		e.checkNoLeaks(ctx, t, before, true)
	})
	e.createClaimTemplate(ctx, t, "health-one-vf", vfClaim{})
	t.Run("DRA", func(t *testing.T) { e.draHealth(ctx, t) })
}

// devicePluginHealth: a pod's intel.com/sriov_netdevice VF loses its
// carrier and gets it back.
func (e *env) devicePluginHealth(ctx context.Context, t *testing.T) {
	pod := e.startPod(ctx, t, workloadPod("health-dp", "", map[corev1.ResourceName]int64{sriovResource: 1}))
	addr := e.podEnv(ctx, t, pod.Name)[sriovNetdeviceEnv]
	netdev := e.carrierLost(ctx, t, addr)
	e.waitResourceHealth(ctx, t, pod.Name, string(sriovResource), addr, corev1.ResourceHealthStatusUnhealthy, "")
	e.setCarrier(ctx, t, netdev, true)
	e.waitResourceHealth(ctx, t, pod.Name, string(sriovResource), addr, corev1.ResourceHealthStatusHealthy, "")
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}

// draHealth: a claim's VF loses its carrier: tainted in the slices, and
// Unhealthy with the reason in the pod's status; then both clear.
func (e *env) draHealth(ctx context.Context, t *testing.T) {
	pod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "health-dra", "health-one-vf"))
	addr := e.podEnv(ctx, t, pod.Name)[sriovNetdeviceEnv]
	netdev := e.carrierLost(ctx, t, addr)
	e.slices(t, "the VF without carrier tainted", tainted(deviceName(addr)))
	reason := fmt.Sprintf("link %s is up but has no carrier", netdev)
	e.waitResourceHealth(ctx, t, pod.Name, "claim:vfs", "", corev1.ResourceHealthStatusUnhealthy, reason)
	e.setCarrier(ctx, t, netdev, true)
	e.slices(t, "the VF untainted", tainted())
	e.waitResourceHealth(ctx, t, pod.Name, "claim:vfs", "", corev1.ResourceHealthStatusHealthy, "")
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}

// carrierLost sets the VF's netdev up, as a CNI plugin leaves a VF it
// uses, and takes its carrier away, as a VF's link_state disable or a
// dead switch port does; both are undone when the test ends. It returns
// the netdev's name.
func (e *env) carrierLost(ctx context.Context, t *testing.T, addr string) string {
	t.Helper()
	vf, ok := e.c.Node().Device(addr)
	if !ok || vf.Netdev == nil {
		t.Fatalf("VF %q: %+v, want a VF of the node with a netdev", addr, vf)
	}
	name, wasUp := vf.Netdev.Name, vf.Netdev.Up
	if err := e.c.Node().SetLinkUp(ctx, name, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.c.Node().SetCarrier(context.Background(), name, true)
		e.c.Node().SetLinkUp(context.Background(), name, wasUp)
	})
	e.setCarrier(ctx, t, name, false)
	return name
}

func (e *env) setCarrier(ctx context.Context, t *testing.T, netdev string, on bool) {
	t.Helper()
	if err := e.c.Node().SetCarrier(ctx, netdev, on); err != nil {
		t.Fatal(err)
	}
}

// waitResourceHealth waits until the pod's container lists resource with
// one device (id, when given) of the wanted health and message.
func (e *env) waitResourceHealth(ctx context.Context, t *testing.T, pod, resource, id string, health corev1.ResourceHealthStatus, message string) {
	t.Helper()
	start := time.Now()
	var last []corev1.ResourceStatus
	err := cluster.Poll(ctx, healthReact, fmt.Sprintf("pod %s's %s %s", pod, resource, health), func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("%d container statuses", len(p.Status.ContainerStatuses))
		}
		last = p.Status.ContainerStatuses[0].AllocatedResourcesStatus
		return resourceHealthIs(last, resource, id, health, message)
	})
	if err != nil {
		t.Fatalf("%v; allocatedResourcesStatus %+v", err, last)
	}
	t.Logf("pod %s: %s %s after %v", pod, resource, health, time.Since(start).Round(time.Millisecond))
}

func resourceHealthIs(statuses []corev1.ResourceStatus, resource, id string, health corev1.ResourceHealthStatus, message string) error {
	for _, rs := range statuses {
		if string(rs.Name) != resource {
			continue
		}
		if len(rs.Resources) != 1 {
			return fmt.Errorf("%s lists %d devices, want 1", resource, len(rs.Resources))
		}
		r := rs.Resources[0]
		msg := ""
		if r.Message != nil {
			msg = *r.Message
		}
		if (id != "" && string(r.ResourceID) != id) || r.Health != health || msg != message {
			return fmt.Errorf("%s: %s %s %q", resource, r.ResourceID, r.Health, msg)
		}
		return nil
	}
	return fmt.Errorf("no status of %s", resource)
}
