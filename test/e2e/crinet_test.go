package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// crinetNetwork is an SR-IOV network set through the CRI network API: the
// sriov-net NAD's plugins, on another subnet, under a name no NAD has.
const crinetNetwork = `
metadata:
  name: crinet-sriov
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_netdevice}
ip_ranges: [{cidr: 10.58.0.0/24}]
cniv1_config:
  cni_version: 1.0.0
  plugins:
    - type: host-device
      capabilities: [ips]
      parameters: {ipam: {type: static}}
    - type: tuning
      capabilities: [mac]
`

// hwnetctl runs hwnetctl in the agent's pod, as an operator would on the
// node, and returns its output; stdin is its standard input.
func (e *env) hwnetctl(ctx context.Context, t *testing.T, stdin []byte, args ...string) (string, error) {
	t.Helper()
	agent, err := e.agentPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Kubectl(ctx, e.c, stdin, append([]string{"-n", AgentNamespace, "exec", "-i", agent.Name, "--", "hwnetctl"}, args...)...)
	return string(out), err
}

// listedNetwork is one network of `hwnetctl network list -o json`.
type listedNetwork struct {
	Config struct {
		Metadata struct {
			Name, Namespace string
		}
	}
	Status struct {
		SandboxManagement, Connectivity bool
		Reason                          string
	}
	Pods []struct {
		PodNamespace, PodName, InterfaceName string
		Ips                                  []struct{ Ip, NetworkName string }
	}
}

func (e *env) listNetworks(ctx context.Context, t *testing.T) map[string]listedNetwork {
	t.Helper()
	out, err := e.hwnetctl(ctx, t, nil, "network", "list", "-o", "json")
	if err != nil {
		t.Fatalf("hwnetctl network list: %v", err)
	}
	var resp struct{ Networks []listedNetwork }
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("hwnetctl network list -o json: %v\n%s", err, out)
	}
	m := map[string]listedNetwork{}
	for _, n := range resp.Networks {
		m[strings.TrimPrefix(n.Config.Metadata.Namespace+"/"+n.Config.Metadata.Name, "/")] = n
	}
	return m
}

// TestCRINet_E2E_SRIOVNetworkSetSelectedListedRemoved: `hwnetctl network
// set` adds an SR-IOV network on the node; a pod selecting it by name gets
// a VF and its IP; `list` shows the network in use with connectivity and
// the pod's IP under the network's name; `remove` is refused while the pod
// runs and succeeds once it is gone.
func TestCRINet_E2E_SRIOVNetworkSetSelectedListedRemoved(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	out, err := e.hwnetctl(ctx, t, []byte(crinetNetwork), "network", "set", "-f", "-")
	if err != nil || !strings.Contains(out, "network default/crinet-sriov set") {
		t.Fatalf("hwnetctl network set: %v\n%s", err, out)
	}
	t.Cleanup(func() { e.hwnetctl(context.Background(), t, nil, "network", "remove", "default/crinet-sriov") })
	if fb, ok := e.listNetworks(ctx, t)["_fallback"]; !ok || !fb.Status.SandboxManagement {
		t.Errorf("_fallback: %+v (listed %v), want ready", fb, ok)
	}
	pod := workloadPod("crinet-sriov", `[{"name": "crinet-sriov", "ips": ["10.58.0.10/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err = e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := networkStatus(t, pod)[1]
	device := e.podEnv(ctx, t, pod.Name)["PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"]
	if st.Name != "default/crinet-sriov" || !slices.Equal(st.IPs, []string{"10.58.0.10/24"}) || pciAddress(st) != device || device == "" {
		t.Errorf("network-status[1] = %+v, want default/crinet-sriov with 10.58.0.10/24 on the pod's VF %q", st, device)
	}
	links := podLinks(t, e.containerPID(ctx, t, pod))
	if l, ok := links[st.Interface]; !ok || !slices.Equal(l.Addrs, []string{"10.58.0.10/24"}) {
		t.Errorf("pod netns %s = %+v (present %v), want the VF with 10.58.0.10/24", st.Interface, l, ok)
	}
	if table, err := e.hwnetctl(ctx, t, nil, "network", "list"); err == nil {
		t.Logf("hwnetctl network list:\n%s", table)
	}
	n := e.listNetworks(ctx, t)["default/crinet-sriov"]
	if !n.Status.SandboxManagement || !n.Status.Connectivity {
		t.Errorf("status: %+v, want sandbox_management and connectivity", n.Status)
	}
	if len(n.Pods) != 1 || n.Pods[0].PodName != pod.Name || len(n.Pods[0].Ips) != 1 ||
		n.Pods[0].Ips[0].Ip != "10.58.0.10" || n.Pods[0].Ips[0].NetworkName != "default/crinet-sriov" {
		t.Errorf("pods: %+v, want %s with 10.58.0.10 under default/crinet-sriov", n.Pods, pod.Name)
	}
	out, err = e.hwnetctl(ctx, t, nil, "network", "remove", "default/crinet-sriov")
	if err == nil || !strings.Contains(err.Error(), "default/crinet-sriov") || !strings.Contains(err.Error(), "in use") {
		t.Errorf("remove while the pod runs: %v\n%s, want refused as in use", err, out)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	// The pod object goes once kubelet stopped its sandbox (CNI DEL).
	err = cluster.Poll(ctx, leakTimeout, "crinet-sriov removable", func(ctx context.Context) error {
		_, err := e.hwnetctl(ctx, t, nil, "network", "remove", "default/crinet-sriov")
		return err
	})
	if err != nil {
		t.Fatalf("remove once the pod is gone: %v", err)
	}
	if _, ok := e.listNetworks(ctx, t)["default/crinet-sriov"]; ok {
		t.Errorf("still listed after remove")
	}
}
