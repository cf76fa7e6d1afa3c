package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// hangNAD is a VF network whose second plugin never answers ADD: the VF
// is already in the sandbox when the chain stalls.
const hangNAD = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: hang-net
  namespace: default
  annotations:
    k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_netdevice
spec:
  config: |
    {
      "cniVersion": "1.0.0",
      "name": "hang-net",
      "plugins": [
        {"type": "host-device", "capabilities": {"ips": true}, "ipam": {"type": "static"}},
        {"type": "hwnet-test-plugin", "personality": "plain", "hangOn": ["ADD"]}
      ]
    }
`

// hangTimeout is the agent's --cni-plugin-timeout in TestFault_HangingPlugin.
const hangTimeout = "5s"

// TestFault_HangingPlugin: a delegate plugin that never answers is killed
// after the agent's plugin timeout, far inside kubelet's sandbox deadline;
// the pod's Event names the network, the plugin and the timeout; the VF
// the chain had already moved comes back; and once the pod is deleted the
// node is at its baseline (issue 12 item 5).
func TestFault_HangingPlugin(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	if err := InstallCNIPlugin(ctx, e.c, filepath.Join(cniplugins.Dir(t), cniplugins.Recorder)); err != nil {
		t.Fatal(err)
	}
	e.applyForTest(ctx, t, hangNAD, "network-attachment-definitions.k8s.cni.cncf.io/hang-net")
	e.agentArgs(ctx, t, "--cni-plugin-timeout="+hangTimeout)
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("hanging-plugin", `[{"name": "hang-net", "ips": ["10.56.8.1/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	if err := e.create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	e.waitEventWith(ctx, t, pod.Name, "FailedCreatePodSandBox", "hang-net", `type="hwnet-test-plugin"`, "plugin timeout of "+hangTimeout)
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// waitEventWith waits for a Warning Event of the pod with the reason whose
// message has every one of parts, and returns the message.
func (e *env) waitEventWith(ctx context.Context, t *testing.T, pod, reason string, parts ...string) string {
	t.Helper()
	var found string
	mustPoll(ctx, t, fmt.Sprintf("a %s Event of pod %s naming %q", reason, pod, parts), func(ctx context.Context) error {
		events, err := e.podEvents(ctx, pod, reason)
		if err != nil {
			return err
		}
		for _, ev := range events {
			if containsAll(ev.Message, parts) {
				found = ev.Message
				return nil
			}
		}
		return fmt.Errorf("none yet%s", e.lastEvent(ctx, pod))
	})
	return found
}

func containsAll(s string, subs []string) bool {
	return !slices.ContainsFunc(subs, func(sub string) bool { return !strings.Contains(s, sub) })
}

// applyForTest applies a manifest and deletes what it names (kind/name)
// when the test ends.
func (e *env) applyForTest(ctx context.Context, t *testing.T, manifest, name string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
		defer cancel()
		if _, err := Kubectl(ctx, e.c, nil, "-n", podNamespace, "delete", "--ignore-not-found", name); err != nil {
			t.Error(err)
		}
	})
	if _, err := Kubectl(ctx, e.c, []byte(manifest), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// agentArgs runs hwnet-agent with args added to its DaemonSet's until the
// test ends, and waits until such an agent is ready with every pool.
func (e *env) agentArgs(ctx context.Context, t *testing.T, args ...string) {
	t.Helper()
	// Registered first, so it runs once the original args are back.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := WaitHwnetReady(ctx, e.c, e.pools, io.Discard); err != nil {
			t.Error(err)
		}
	})
	e.withAgentArgs(ctx, t, func(a []string) []string { return append(a, args...) })
	if err := WaitHwnetReady(ctx, e.c, e.pools, io.Discard); err != nil {
		t.Fatal(err)
	}
}

// withAgentArgs runs hwnet-agent with its DaemonSet's args as edit makes
// them and waits until such an agent runs, ready or not: an agent that
// cannot read a source of holders is never ready. The returned restore
// puts the original args back and waits until such an agent is ready; the
// test's end does too.
func (e *env) withAgentArgs(ctx context.Context, t *testing.T, edit func([]string) []string) (restore func(context.Context) error) {
	t.Helper()
	ds, err := e.client.AppsV1().DaemonSets(AgentNamespace).Get(ctx, "hwnet-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	original := ds.Spec.Template.Spec.Containers[0].Args
	restore = func(ctx context.Context) error { return e.setAgentArgs(ctx, original, true) }
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Error(err)
		}
	})
	if err := e.setAgentArgs(ctx, edit(slices.Clone(original)), false); err != nil {
		t.Fatal(err)
	}
	return restore
}

// setAgentArgs puts args in the agent's DaemonSet and waits until the
// node's agent pod runs with them, and is ready when ready says so.
func (e *env) setAgentArgs(ctx context.Context, args []string, ready bool) error {
	dss := e.client.AppsV1().DaemonSets(AgentNamespace)
	ds, err := dss.Get(ctx, "hwnet-agent", metav1.GetOptions{})
	if err != nil {
		return err
	}
	ds.Spec.Template.Spec.Containers[0].Args = args
	if _, err := dss.Update(ctx, ds, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return cluster.Poll(ctx, podTimeout, "hwnet-agent running with "+strings.Join(args, " "), func(ctx context.Context) error {
		pods, err := agentPods(ctx, e.client, e.c.NodeName())
		if err != nil {
			return err
		}
		var seen []string
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && slices.Equal(p.Spec.Containers[0].Args, args) &&
				(podReady(&p) || !ready) {
				return nil
			}
			seen = append(seen, fmt.Sprintf("%s (%s, ready %t) runs %v", p.Name, p.Status.Phase, podReady(&p), p.Spec.Containers[0].Args))
		}
		return fmt.Errorf("%s", strings.Join(seen, "; "))
	})
}

// TestFault_VanishedNetdev: a free VF whose netdev leaves the node (here
// into a namespace of its own, as a netdev stuck in a dead pod's) is
// reported unhealthy through the device plugin, so kubelet counts it out
// of the allocatable VFs and a pod asking for every other VF is not given
// it; once the netdev is back (its namespace destroyed, it returns as a
// real VF's does) the VF is healthy again (issue 12 item 5).
func TestFault_VanishedNetdev(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	addr, netdev := e.freeVF(ctx, t, sriovResource)
	const hideout = "hwnet-e2e-vanished"
	if _, err := Exec(ctx, e.c, nil, "ip", "netns", "add", hideout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Exec(context.Background(), e.c, nil, "ip", "netns", "del", hideout) })
	if _, err := Exec(ctx, e.c, nil, "ip", "link", "set", netdev, "netns", hideout); err != nil {
		t.Fatal(err)
	}
	healthy := e.pools[sriovResource]
	e.waitAllocatable(ctx, t, sriovResource, healthy-1)
	pod := workloadPod("vanished-netdev", "", map[corev1.ResourceName]int64{sriovResource: healthy - 1})
	e.cleanupPods(t, pod.Name)
	if err := e.create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	mustPoll(ctx, t, "pod "+pod.Name+" Running", func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase != corev1.PodRunning {
			err = fmt.Errorf("pod is %s%s", p.Status.Phase, e.lastEvent(ctx, pod.Name))
		}
		return err
	})
	given := strings.Split(e.podEnv(ctx, t, pod.Name)["PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"], ",")
	if len(given) != int(healthy-1) || slices.Contains(given, addr) {
		t.Errorf("pod given VFs %v, want %d without %s, whose netdev %s vanished", given, healthy-1, addr, netdev)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	if _, err := Exec(ctx, e.c, nil, "ip", "netns", "del", hideout); err != nil {
		t.Fatal(err)
	}
	e.waitAllocatable(ctx, t, sriovResource, healthy)
	e.checkNoLeaks(ctx, t, before, true)
}

// freeVF returns the PCI address and netdev of a VF of the resource that
// no pod holds.
func (e *env) freeVF(ctx context.Context, t *testing.T, res corev1.ResourceName) (addr, netdev string) {
	t.Helper()
	held, err := e.allocated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.podres.GetAllocatableResources(ctx, &podresv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range resp.Devices {
		if d.ResourceName != string(res) {
			continue
		}
		for _, id := range d.DeviceIds {
			f, ok := e.c.Node().Device(id)
			isHeld := slices.ContainsFunc(held, func(h string) bool { return strings.Contains(h, " "+id+" ") })
			if ok && f.Netdev != nil && !isHeld {
				return id, f.Netdev.Name
			}
		}
	}
	t.Fatalf("no free %s VF with a netdev", res)
	return "", ""
}

// waitAllocatable waits until the node's allocatable count of res, which
// counts the healthy devices only, is want.
func (e *env) waitAllocatable(ctx context.Context, t *testing.T, res corev1.ResourceName, want int64) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("node allocatable %s=%d", res, want), func(ctx context.Context) error {
		node, err := e.client.CoreV1().Nodes().Get(ctx, e.c.NodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if q := node.Status.Allocatable[res]; q.Value() != want {
			return fmt.Errorf("allocatable %s", q.String())
		}
		return nil
	})
}

// TestFault_DELAfterNetnsGone: a pod whose network namespace was unmounted
// before its sandbox was stopped (the runtime then passes no netns, as
// containerd does for a closed one) is still deleted, its record, leases
// and device-info files go, and its VF comes back once the namespace dies
// with the sandbox (issue 12 item 1).
func TestFault_DELAfterNetnsGone(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("netns-gone", `[{"name": "sriov-net", "ips": ["10.56.9.1/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	data, err := Exec(ctx, e.c, nil, "cat", hwnetCacheDir+"/containers/"+e.sandboxID(ctx, t, pod)+".json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Netns string `json:"netns"`
	}
	// The record's first value; the results follow it.
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&rec); err != nil || rec.Netns == "" {
		t.Fatalf("record %s: netns %q (%v)", data, rec.Netns, err)
	}
	if _, err := Exec(ctx, e.c, nil, "sh", "-c", `umount "$1" && rm "$1"`, "sh", rec.Netns); err != nil {
		t.Fatal(err)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}
