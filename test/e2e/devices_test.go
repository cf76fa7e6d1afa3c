package e2e

import (
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
	out, err := e.hwnetctl(ctx, t, nil, "devices", "--config", agentConfigFile, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var listed heldDevices
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("%v: %s", err, out)
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
