package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// agentConfigFile is the pool config deploy/hwnet-agent.yaml mounts and
// gives the agent (--config-file), not hwnetctl's default.
const agentConfigFile = "/etc/hwnet/config.yaml"

// heldDevices is what the test reads of `hwnetctl devices -o json`.
type heldDevices struct {
	Devices []struct {
		Device, Pool, Mode string
		Healthy            bool
		Holders            []struct {
			Kind, Namespace, Name, Container, Since string
		}
	}
	UnknownSources []string
}

// TestHwnetctlDevicesShowsHolders: in the agent pod, with the deployment's
// mounts and only --config given, `hwnetctl devices` shows the VF a pod got
// through the device plugin held by the pod's container and by its
// sandbox's CNI attachment, each with a start time; and no other device
// held by that pod.
func TestHwnetctlDevicesShowsHolders(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	pod := workloadPod("devices-held", `[{"name": "sriov-net", "ips": ["10.56.10.1/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	device := e.podEnv(ctx, t, pod.Name)["PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"]
	listed, err := e.listDevices(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed.UnknownSources) > 0 {
		t.Errorf("sources unread in the agent pod: %q", listed.UnknownSources)
	}
	checkPodHolds(t, listed, pod.Name, device)
	table, err := e.hwnetctl(ctx, t, nil, "devices", "--config", agentConfigFile)
	t.Logf("hwnetctl devices (%v):\n%s", err, table)
}

// checkPodHolds checks that of the listed devices the pod holds device,
// in its pool, healthy, as its container and its sandbox, and no other.
func checkPodHolds(t *testing.T, listed heldDevices, pod, device string) {
	t.Helper()
	found := false
	for _, d := range listed.Devices {
		held := map[string]bool{} // "kind container" of the pod's holds with a time
		for _, h := range d.Holders {
			if h.Namespace == podNamespace && h.Name == pod && h.Since != "" {
				held[h.Kind+" "+h.Container] = true
			}
		}
		if d.Device != device {
			if len(held) > 0 {
				t.Errorf("%s, not the pod's VF %s, is held by the pod: %+v", d.Device, device, d)
			}
			continue
		}
		found = true
		if d.Pool != string(sriovResource) || d.Mode != "devicePlugin" || !d.Healthy {
			t.Errorf("the pod's VF: %+v, want healthy in %s, mode devicePlugin", d, sriovResource)
		}
		if !held["pod "+container] || len(held) != 2 {
			t.Errorf("the pod's VF %s holders %+v, want pod %s/%s (%s) and its sandbox's attachment, with times",
				device, d.Holders, podNamespace, pod, container)
		}
	}
	if !found {
		t.Errorf("the pod's VF %s is not listed: %+v", device, listed.Devices)
	}
}

// waitUnheld waits until the device ledger, as `hwnetctl devices` in the
// agent pod reads it, lists no holder of a device of the pools: every
// earlier pod, claim and sandbox of theirs has let go.
func (e *env) waitUnheld(ctx context.Context, t *testing.T, pools ...corev1.ResourceName) {
	t.Helper()
	err := cluster.Poll(ctx, podTimeout, "the devices of "+fmt.Sprint(pools)+" held by nothing", func(ctx context.Context) error {
		listed, err := e.listDevices(ctx)
		if err != nil {
			return err
		}
		var held []string
		for _, d := range listed.Devices {
			if !slices.Contains(pools, corev1.ResourceName(d.Pool)) {
				continue
			}
			for _, h := range d.Holders {
				held = append(held, fmt.Sprintf("%s by %s %s/%s", d.Device, h.Kind, h.Namespace, h.Name))
			}
		}
		if len(held) > 0 || len(listed.UnknownSources) > 0 {
			return fmt.Errorf("held: %s; unread sources: %q", strings.Join(held, ", "), listed.UnknownSources)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// listDevices is `hwnetctl devices -o json` in the running agent pod; no
// agent pod ready yet (one rolling) is an error to wait out.
func (e *env) listDevices(ctx context.Context) (heldDevices, error) {
	var listed heldDevices
	agent, err := e.agentPod(ctx)
	if err != nil {
		return listed, err
	}
	out, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "exec", agent.Name, "--",
		"hwnetctl", "devices", "--config", agentConfigFile, "-o", "json")
	if err != nil {
		return listed, err
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		return listed, fmt.Errorf("hwnetctl devices: %w: %s", err, out)
	}
	return listed, nil
}
