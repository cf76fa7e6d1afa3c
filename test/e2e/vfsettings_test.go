package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

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

// The calls the claim's settings make, and those that reset them: the
// VLAN the admin gave every VF before hwnet (adminVLAN, seeded in the
// recorder as set by hand) and the rates a new VF has.
var (
	vfApplied = map[string]string{"vlan": "100 qos 0 proto 802.1Q", "rate": "0-1000"}
	vfReset   = map[string]string{"vlan": adminVLAN, "rate": "0-0"}
)

const adminVLAN = "42 qos 0 proto 802.1Q"

// TestVFSettings_ClaimAppliedReportedReset (issues 34 and 42): a claim with
// vlan 100 and maxTxRate 1000, which the VFSettingsPolicy grants its
// namespace, gets them set through the VF's PF (the agent's recorded
// calls) and reported in the claim's status and network-status; deleting
// the pod puts back what the VF had, the admin's VLAN 42, also when the
// agent was killed between the prepare and the pod's end; the node ends at
// its baseline.
func TestVFSettings_ClaimAppliedReportedReset(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	if err := InstallCNIPlugin(ctx, e.c, filepath.Join(cniplugins.Dir(t), cniplugins.Recorder)); err != nil {
		t.Fatal(err)
	}
	if _, err := Exec(ctx, e.c, nil, "rm", "-f", vfAdminLog); err != nil {
		t.Fatal(err)
	}
	e.seedAdminVLAN(ctx, t)
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
	e.grantVFSettings(ctx, t)
	e.tenantRefused(ctx, t)
	e.createTemplates(ctx, t, vfSettingsTemplate)
	before := e.mustSnapshot(ctx, t)
	t.Run("applied, reported, reset", func(t *testing.T) { e.vfSettingsCycle(ctx, t, "vf-settings", nil) })
	t.Run("agent killed mid-way", func(t *testing.T) { e.vfSettingsCycle(ctx, t, "vf-settings-killed", want) })
	t.Run("agent away at the DEL", func(t *testing.T) { e.vfSettingsAgentAway(ctx, t, want) })
	e.checkNoLeaks(ctx, t, before, true)
}

// The VFSettingsPolicy the test gives namespace default (issue 42): VLANs
// 100-199 and rates up to 1000 Mbit/s besides the MACs the cluster's
// (VFSettingsPolicyFile) lets it set.
const (
	vfPolicyGranting = `apiVersion: hwnet.io/v1alpha1
kind: VFSettingsPolicy
metadata: {name: hwnet}
spec:
  rules:
  - name: e2e-default
    namespaces: [default]
    allow:
      vlans: [{min: 100, max: 199}]
      maxTxRateMbps: 1000
      macAddress: true
`
	// A claim template and a NAD of namespace default asking for VLAN 300,
	// which the policy does not grant it.
	vfRefusedTemplate = `apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: vf-vlan-300, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: vf, exactly: {deviceClassName: hwnet-sriov-netdevice}}]
      config:
      - opaque:
          driver: hwnet.io
          parameters: {apiVersion: hwnet.io/v1alpha1, kind: NetworkConfig, vf: {vlan: 300}}
`
	vfRefusedNAD = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: vf-vlan-300
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_netdevice}
spec:
  config: '{"cniVersion": "1.0.0", "name": "vf-vlan-300", "type": "host-device", "vlan": 300}'
`
)

// vfVLANNAD is a NAD of namespace default whose sriov-cni key sets VLAN
// 150 on a VF of intel.com/sriov_fabric_a, a device plugin pool, through
// host-device: the CNI side sets it, and the DEL resets it.
const vfVLANNAD = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: vf-vlan-150
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_fabric_a}
spec:
  config: '{"cniVersion": "1.0.0", "name": "vf-vlan-150", "type": "host-device", "vlan": 150}'
`

// vfSettingsAgentAway (issue 42): a pod's NAD sets VLAN 150 on its VF; the
// agent is taken off the node and the pod deleted, so the shim does the
// DEL alone and can reset nothing; the agent, back, puts the admin's VLAN
// back before it offers a device again: the reset is among the recorded
// calls by the time the agent is ready.
func (e *env) vfSettingsAgentAway(ctx context.Context, t *testing.T, pools Pools) {
	e.applyUntilTestEnds(ctx, t, vfVLANNAD, nil)
	pod := workloadPod("vf-settings-away", `[{"name": "vf-vlan-150"}]`, map[corev1.ResourceName]int64{fabricA: 1})
	e.cleanupPods(t, pod.Name)
	start := len(e.vfCalls(ctx, t))
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	pci := pciAddress(networkStatus(t, pod)[1])
	e.waitVFCalls(ctx, t, pci, map[string]string{"vlan": "150 qos 0 proto 802.1Q"}, start)
	setBefore := len(e.vfCalls(ctx, t))
	restart := e.stopAgentUntil(ctx, t, pools)
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	if calls := e.vfCalls(ctx, t)[setBefore:]; len(calls) > 0 {
		t.Fatalf("VF calls with the agent away: %+v", calls)
	}
	if err := restart(ctx); err != nil {
		t.Fatal(err)
	}
	reset := slices.ContainsFunc(e.vfCalls(ctx, t)[setBefore:], func(c vfadmin.Call) bool {
		return c.PCIAddress == pci && c.Op == "vlan" && c.Value == adminVLAN && c.PF != ""
	})
	if !reset {
		t.Errorf("VF %s: the agent offers devices again before it put back VLAN %q, which the shim's DEL left to it", pci, adminVLAN)
	}
}

// grantVFSettings gives namespace default its VFSettingsPolicy rule until
// the test ends, once the installed admission policies refuse a VLAN the
// rule does not grant, through a claim template and through a NAD, naming
// the knob, the value and the rule.
func (e *env) grantVFSettings(ctx context.Context, t *testing.T) {
	t.Helper()
	e.applyUntilTestEnds(ctx, t, vfPolicyGranting, readRepoFile(t, e.repo, VFSettingsPolicyFile))
	for _, tc := range []struct{ object, want string }{
		{vfRefusedTemplate, "VF setting vf.vlan=300 refused by VFSettingsPolicy hwnet rule e2e-default for namespace default"},
		{vfRefusedNAD, "VF setting vlan=300 refused by VFSettingsPolicy hwnet rule e2e-default for namespace default"},
	} {
		// The admission policies read the new rule once their informer has
		// it: until then the refusal says no rule.
		mustPoll(ctx, t, "the VF settings admission policy refusing: "+tc.want, func(ctx context.Context) error {
			out, err := Kubectl(ctx, e.c, []byte(tc.object), "create", "--dry-run=server", "-f", "-")
			switch {
			case err == nil:
				return fmt.Errorf("admitted: %s", out)
			case !strings.Contains(err.Error(), tc.want):
				return err
			}
			return nil
		})
	}
}

// tenantNamespace is a namespace no VFSettingsPolicy rule names.
const tenantNamespace = "hwnet-e2e-tenant"

// tenantRefused: a namespace user of a namespace no rule names, whose
// Role allows only claim templates there, with its own token, may create a
// template without VF settings, and one turning trust on is refused at
// admission, naming the knob, the value and that no rule names its
// namespace.
func (e *env) tenantRefused(ctx context.Context, t *testing.T) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenantNamespace}}
	if _, err := e.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := e.client.CoreV1().Namespaces().Delete(ctx, tenantNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	base, err := e.c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeapi.NamespaceUser(ctx, e.client, base, tenantNamespace, []rbacv1.PolicyRule{
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaimtemplates"}, Verbs: []string{"create"}}})
	if err != nil {
		t.Fatal(err)
	}
	user := kubernetes.NewForConfigOrDie(cfg)
	create := func(name, vf string) error {
		params := `{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig"` + vf + `}`
		tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceClaimTemplateSpec{
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests: []resourceapi.DeviceRequest{{Name: "vf", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "hwnet-sriov-netdevice"}}},
				Config: []resourceapi.DeviceClaimConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
					Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: "hwnet.io", Parameters: runtime.RawExtension{Raw: []byte(params)}}}}},
			}}}}
		_, err := user.ResourceV1().ResourceClaimTemplates(tenantNamespace).Create(ctx, tmpl, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	kubeapi.CheckWrite(t, "a namespace user's template without VF settings", "", create("plain", ""))
	kubeapi.CheckWrite(t, "a namespace user's template turning trust on",
		"VF setting vf.trust=true refused by VFSettingsPolicy hwnet: no rule for namespace "+tenantNamespace,
		create("trusted", `, "vf": {"trust": true}`))
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

// seedAdminVLAN records adminVLAN on every VF of the node as an admin's
// own setting, made before hwnet: what the recorder's Read then reports,
// and what a reset must put back (issue 42), not the kernel's VLAN 0.
func (e *env) seedAdminVLAN(ctx context.Context, t *testing.T) {
	t.Helper()
	var lines []byte
	for _, f := range e.c.Node().Devices() {
		if f.PF == "" {
			continue
		}
		line, err := json.Marshal(vfadmin.Call{Op: "vlan", VF: f.VFIndex, PCIAddress: f.Addr, Value: adminVLAN, Seed: true})
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, line...), '\n')
	}
	if _, err := Exec(ctx, e.c, lines, "sh", "-c", "mkdir -p $(dirname "+vfAdminLog+") && cat >> "+vfAdminLog); err != nil {
		t.Fatal(err)
	}
}

// agentRestarts is the restart count of the node's hwnet-agent container.
func (e *env) agentRestarts(ctx context.Context) (int32, error) {
	agents, err := agentPods(ctx, e.client, e.c.NodeName())
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
