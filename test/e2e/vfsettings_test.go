package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

const (
	vfSettingsTemplate = "vf-settings-claim-template.yaml"
	// vfAdminLog is where the agent's VF admin recorder appends, on a
	// hostPath the agent mounts (/var/lib/hwnet): the virtual node's PFs
	// are veths, which take no VF settings.
	vfAdminLog = "/var/lib/hwnet/vf-admin-e2e.jsonl"
)

// The calls the claim's settings make, and those that reset them.
var (
	vfApplied = map[string]string{"vlan": "100 qos 0 proto 802.1Q", "rate": "0-1000"}
	vfReset   = map[string]string{"vlan": "0 qos 0 proto 802.1Q", "rate": "0-0"}
)

// TestVFSettings_ClaimAppliedReportedReset (issue 34): a claim with vlan
// 100 and maxTxRate 1000 gets them set through the VF's PF (the agent's
// recorded calls) and reported in the claim's status and network-status;
// deleting the pod resets them to the defaults, also when the agent was
// killed between the prepare and the pod's end; the node ends at its
// baseline.
func TestVFSettings_ClaimAppliedReportedReset(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	if err := InstallCNIPlugin(ctx, e.c, filepath.Join(cniplugins.Dir(t), cniplugins.Recorder)); err != nil {
		t.Fatal(err)
	}
	if _, err := Exec(ctx, e.c, nil, "rm", "-f", vfAdminLog); err != nil {
		t.Fatal(err)
	}
	// The recorder first, with the default pools agentArgs waits for;
	// cleanups run in reverse, so the pools are back before the flag goes.
	e.agentArgs(ctx, t, "--vf-admin=record:"+vfAdminLog)
	original := readRepoFile(t, e.repo, PoolsFile)
	draPools := claimNetPoolsConfig(t, e.repo)
	e.usePools(ctx, t, draPools)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	want, err := ExpectedPools(ctx, e.c, draPools)
	if err != nil {
		t.Fatal(err)
	}
	e.slices(t, "the DRA pools' devices published", func(d kubeapi.SliceDevices) bool { return len(d) == claimNetDevices })
	e.createTemplates(ctx, t, vfSettingsTemplate)
	before := e.mustSnapshot(ctx, t)
	t.Run("applied, reported, reset", func(t *testing.T) { e.vfSettingsCycle(ctx, t, "vf-settings", nil) })
	t.Run("agent killed mid-way", func(t *testing.T) { e.vfSettingsCycle(ctx, t, "vf-settings-killed", want) })
	e.checkNoLeaks(ctx, t, before, true)
}

// vfSettingsCycle runs a pod with the settings' claim, checks what was set
// and reported, kills the agent when killed has the pools to wait for
// again, deletes the pod and waits for the reset.
func (e *env) vfSettingsCycle(ctx context.Context, t *testing.T, name string, killed Pools) {
	pod := e.draPod(t, claimPodFile, name, "sriov-net-vf-settings")
	e.cleanupPods(t, pod.Name)
	start := len(e.vfCalls(ctx, t))
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	pci := pciAddress(networkStatus(t, pod)[1])
	if pci == "" {
		t.Fatalf("pod %s network-status %s: no VF", pod.Name, pod.Annotations[statusKey])
	}
	e.waitVFCalls(ctx, t, pci, vfApplied, start)
	setBefore := len(e.vfCalls(ctx, t))
	checkStatusVF(t, pod)
	e.checkClaimVF(ctx, t, pod)
	if killed != nil {
		restarts, err := e.agentRestarts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		e.killAgentWhenScheduled(ctx, t, pod.Name, 0)
		mustPoll(ctx, t, "hwnet-agent restarted after the kill", func(ctx context.Context) error {
			n, err := e.agentRestarts(ctx)
			if err == nil && n <= restarts {
				err = fmt.Errorf("restart count %d", n)
			}
			return err
		})
		if err := WaitHwnetReady(ctx, e.c, killed, testWriter{t}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	e.waitVFCalls(ctx, t, pci, vfReset, setBefore)
}

// agentRestarts is the restart count of the node's hwnet-agent container.
func (e *env) agentRestarts(ctx context.Context) (int32, error) {
	agents, err := e.client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: AgentSelector, FieldSelector: "spec.nodeName=" + e.c.NodeName()})
	if err != nil {
		return 0, err
	}
	if len(agents.Items) != 1 || len(agents.Items[0].Status.ContainerStatuses) == 0 {
		return 0, fmt.Errorf("%d hwnet-agent pods on %s", len(agents.Items), e.c.NodeName())
	}
	return agents.Items[0].Status.ContainerStatuses[0].RestartCount, nil
}

// vfCalls reads the agent's recorded VF admin calls.
func (e *env) vfCalls(ctx context.Context, t *testing.T) []vfadmin.Call {
	t.Helper()
	calls, err := e.readVFCalls(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// readVFCalls reads the recorder's file, none before the first call.
func (e *env) readVFCalls(ctx context.Context) ([]vfadmin.Call, error) {
	out, err := Exec(ctx, e.c, nil, "sh", "-c", "test ! -e "+vfAdminLog+" || cat "+vfAdminLog)
	if err != nil {
		return nil, err
	}
	return vfadmin.ParseCalls(out)
}

// waitVFCalls waits until the calls recorded after the first from have
// set each op in want to its value on the VF at pci.
func (e *env) waitVFCalls(ctx context.Context, t *testing.T, pci string, want map[string]string, from int) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("VF %s: recorded calls %v", pci, want), func(ctx context.Context) error {
		calls, err := e.readVFCalls(ctx)
		if err != nil {
			return err
		}
		for op, value := range want {
			if !slices.ContainsFunc(calls[min(from, len(calls)):], func(c vfadmin.Call) bool {
				return c.PCIAddress == pci && c.Op == op && c.Value == value && c.PF != ""
			}) {
				return fmt.Errorf("no %s %q among %+v", op, value, calls)
			}
		}
		return nil
	})
}

// checkStatusVF: network-status's claim entry has the applied settings
// under hwnet's key.
func checkStatusVF(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	var list []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(pod.Annotations[statusKey]), &list); err != nil || len(list) != 2 {
		t.Fatalf("network-status %s: %v", pod.Annotations[statusKey], err)
	}
	checkVF(t, "network-status[1] io.hwnet.vf", list[1]["io.hwnet.vf"])
}

// checkClaimVF: the claim's status.devices entry has the applied settings
// in its data.
func (e *env) checkClaimVF(ctx context.Context, t *testing.T, pod *corev1.Pod) {
	t.Helper()
	devs := e.claimDevices(ctx, t, pod)
	if len(devs) != 1 || devs[0].Data == nil {
		t.Fatalf("claim devices %+v, want one with data", devs)
	}
	var data report.DeviceData
	if err := json.Unmarshal(devs[0].Data.Raw, &data); err != nil || data.VF == nil {
		t.Fatalf("claim device data %s: %v", devs[0].Data.Raw, err)
	}
	raw, _ := json.Marshal(data.VF)
	checkVF(t, "claim status.devices[0].data.vf", raw)
}

func checkVF(t *testing.T, where string, raw json.RawMessage) {
	t.Helper()
	var got vfsettings.Settings
	if err := json.Unmarshal(raw, &got); err != nil || got.VLAN == nil || *got.VLAN != 100 || got.MaxTxRate == nil || *got.MaxTxRate != 1000 {
		t.Errorf("%s %s (%v), want vlan 100 and maxTxRate 1000", where, raw, err)
	}
}
