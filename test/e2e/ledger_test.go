package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// Where the agent's device-info files are on the node.
const devinfoDir = "/var/run/k8s.cni.cncf.io/devinfo/dp"

// sriovNetdeviceEnv names the VFs of intel.com/sriov_netdevice a container
// got, from the device plugin or a claim alike.
const sriovNetdeviceEnv = "PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"

// TestPoolModeSwitchWithPodsRunning (issue 29): one owner per device across
// a pool's mode switch, both ways. A pod holds a VF of the device plugin
// pool; the pool switches to DRA; three claims never get the held VF, which
// is published tainted hwnet.io/held; its device-info file survives three
// collections; once the pod is gone the VF is claimable. Then a claim holds
// a VF; the pool switches back; kubelet counts that VF out, a pod asking
// for every other VF never gets it, its file survives three collections;
// once the claim is gone the node's allocatable is back to its full count.
func TestPoolModeSwitchWithPodsRunning(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original, err := os.ReadFile(filepath.Join(e.repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	vfs := e.poolVFs(ctx, t, sriovResource)
	e.agentArgs(ctx, t, "--devinfo-gc-interval=1s")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.createClaimTemplate(ctx, t, "sriov-any-vf", vfClaim{})
	t.Run("device plugin to DRA", func(t *testing.T) { e.switchToDRAWithPodRunning(ctx, t, vfs) })
	t.Run("DRA to device plugin", func(t *testing.T) { e.switchToDevicePluginWithClaimRunning(ctx, t, original, vfs) })
	e.waitAllocatable(ctx, t, sriovResource, int64(len(vfs)))
}

func (e *env) switchToDRAWithPodRunning(ctx context.Context, t *testing.T, vfs []string) {
	holder := e.startPod(ctx, t, workloadPod("switch-dp-holder", "", map[corev1.ResourceName]int64{sriovResource: 1}))
	held := e.podEnv(ctx, t, holder.Name)[sriovNetdeviceEnv]
	e.switchPools(ctx, t, draPoolsConfig(t, e.repo))
	e.slices(t, "the held VF published tainted hwnet.io/held", heldTaint(held))
	var claims []string
	for i := range 3 {
		pod := e.startPod(ctx, t, e.draPod(t, claimPodFile, fmt.Sprintf("switch-claim-%d", i), "sriov-any-vf"))
		claims = append(claims, pod.Name)
		if got := e.podEnv(ctx, t, pod.Name)[sriovNetdeviceEnv]; got == held || got == "" {
			t.Errorf("claim pod %s got VF %q; want one, not %s, which pod %s holds", pod.Name, got, held, holder.Name)
		}
	}
	e.survivesCollections(ctx, t, sriovResource, held, freeOf(t, vfs, e.heldVFs(ctx, t, append(claims, holder.Name)...)))
	if err := e.deletePods(ctx, append(claims, holder.Name)...); err != nil {
		t.Fatal(err)
	}
	e.slices(t, "the VF free once its pod is gone", tainted())
	e.createClaimTemplate(ctx, t, "sriov-freed-vf", vfClaim{addr: held})
	pod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "switch-claims-freed", "sriov-freed-vf"))
	if got := e.podEnv(ctx, t, pod.Name)[sriovNetdeviceEnv]; got != held {
		t.Errorf("a claim for %s, freed, got %q", held, got)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}

func (e *env) switchToDevicePluginWithClaimRunning(ctx context.Context, t *testing.T, original []byte, vfs []string) {
	claimPod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "switch-dra-holder", "sriov-any-vf"))
	held := e.podEnv(ctx, t, claimPod.Name)[sriovNetdeviceEnv]
	e.switchPools(ctx, t, original)
	others := int64(len(vfs) - 1)
	e.waitAllocatable(ctx, t, sriovResource, others)
	pod := e.startPod(ctx, t, workloadPod("switch-dp-others", "", map[corev1.ResourceName]int64{sriovResource: others}))
	if got := strings.Split(e.podEnv(ctx, t, pod.Name)[sriovNetdeviceEnv], ","); len(got) != int(others) || slices.Contains(got, held) {
		t.Errorf("pod %s got VFs %v; want %d, without %s, which claim pod %s holds", pod.Name, got, others, held, claimPod.Name)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	e.survivesCollections(ctx, t, sriovResource, held, freeOf(t, vfs, []string{held}))
	if err := e.deletePods(ctx, claimPod.Name); err != nil {
		t.Fatal(err)
	}
}

// switchPools puts config in the hwnet-pools ConfigMap and restarts the
// agent, without waiting for any allocatable count: held devices keep it
// below the full one.
func (e *env) switchPools(ctx context.Context, t *testing.T, config []byte) {
	t.Helper()
	e.putPools(ctx, t, config)
	e.restartAgent(ctx, t)
	e.waitConfigServed(ctx, t, config)
}

// waitConfigServed waits until each node's running agent says in its log
// that it serves config: kubelet can start a pod with a ConfigMap's
// content from before an update its cache has not seen yet, and brings
// the volume up to date a minute or more later, when the agent reloads
// (docs/operations.md). TestSwitchdevRepresentor waited 2 minutes for a
// layout the agent, started on the old content, never had (2026-12-06):
// the wait allows kubelet a test's whole time, not a pod's.
func (e *env) waitConfigServed(ctx context.Context, t *testing.T, config []byte) {
	t.Helper()
	sum := sha256.Sum256(config)
	want := hex.EncodeToString(sum[:])
	for _, n := range e.c.Nodes() {
		err := cluster.Poll(ctx, testTimeout, fmt.Sprintf("node %s's agent serving the pool configuration %.12s", n.NodeName(), want), func(ctx context.Context) error {
			name, err := runningAgent(ctx, e.client, n.NodeName())
			if err != nil {
				return err
			}
			log, err := e.client.CoreV1().Pods(AgentNamespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
			if err != nil {
				return err
			}
			if got := lastServed(log); got != want {
				return fmt.Errorf("%s serves the configuration %.12s", name, got)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// lastServed is the SHA-256 of the pool configuration an agent's JSON log
// says it serves last; "" when it says none.
func lastServed(log []byte) string {
	var served string
	for line := range bytes.Lines(log) {
		if !bytes.Contains(line, []byte(`"sha256":`)) {
			continue
		}
		var rec struct {
			Msg    string `json:"msg"`
			SHA256 string `json:"sha256"`
		}
		if json.Unmarshal(line, &rec) == nil && strings.HasPrefix(rec.Msg, "configuration ") {
			served = rec.SHA256
		}
	}
	return served
}

// putPools puts config in the hwnet-pools ConfigMap: the next agent reads
// it at its start, the running one once kubelet updates its volume.
func (e *env) putPools(ctx context.Context, t *testing.T, config []byte) {
	t.Helper()
	cms := e.client.CoreV1().ConfigMaps(AgentNamespace)
	cm, err := cms.Get(ctx, poolsMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{poolsKey: string(config)}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// heldTaint is a condition: the node's draDevicesOnNode devices are
// published and only the VFs at addrs are tainted, as held.
func heldTaint(addrs ...string) func(kubeapi.SliceDevices) bool {
	names := make([]string, len(addrs))
	for i, a := range addrs {
		names[i] = deviceName(a)
	}
	return func(d kubeapi.SliceDevices) bool {
		if len(d) != draDevicesOnNode {
			return false
		}
		for n, dev := range d {
			isHeld := len(dev.Taints) == 1 && dev.Taints[0].Key == heldTaintKey
			if slices.Contains(names, n) != isHeld {
				return false
			}
		}
		return true
	}
}

// deviceName is a VF's device name in a ResourceSlice (dra.DeviceName).
func deviceName(addr string) string {
	return "pci-" + strings.NewReplacer(":", "-", ".", "-").Replace(addr)
}

// vfClaim is what a claim template's one request asks for: a VF of the
// class (hwnet-sriov-netdevice when ""), the one at addr when given,
// tolerating the device taints with the keys tolerate.
type vfClaim struct {
	class    string
	addr     string
	tolerate []string
}

// createClaimTemplate creates a template of one request, want, deleted
// when the test ends.
func (e *env) createClaimTemplate(ctx context.Context, t *testing.T, name string, want vfClaim) {
	t.Helper()
	req := resourceapi.DeviceRequest{Name: "vf", Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: cmp.Or(want.class, "hwnet-sriov-netdevice")}}
	if want.addr != "" {
		req.Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf(`device.attributes["k8s.cni.cncf.io"].deviceID == %q`, want.addr)}}}
	}
	for _, key := range want.tolerate {
		req.Exactly.Tolerations = append(req.Exactly.Tolerations, resourceapi.DeviceToleration{
			Key: key, Operator: resourceapi.DeviceTolerationOpExists, Effect: resourceapi.DeviceTaintEffectNoSchedule})
	}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNamespace},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{req}}}}}
	templates := e.client.ResourceV1().ResourceClaimTemplates(podNamespace)
	if _, err := templates.Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { templates.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// poolVFs are the VFs of the device plugin resource, as kubelet lists
// them.
func (e *env) poolVFs(ctx context.Context, t *testing.T, res corev1.ResourceName) []string {
	t.Helper()
	resp, err := e.podres.GetAllocatableResources(ctx, &podresv1.AllocatableResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range resp.Devices {
		if d.ResourceName == string(res) {
			out = append(out, d.DeviceIds...)
		}
	}
	if len(out) == 0 {
		t.Fatalf("kubelet lists no device of %s", res)
	}
	return out
}

// heldVFs are the sriov_netdevice VFs the pods got.
func (e *env) heldVFs(ctx context.Context, t *testing.T, pods ...string) []string {
	t.Helper()
	var out []string
	for _, p := range pods {
		out = append(out, strings.Split(e.podEnv(ctx, t, p)[sriovNetdeviceEnv], ",")...)
	}
	return out
}

func freeOf(t *testing.T, vfs, held []string) string {
	t.Helper()
	for _, v := range vfs {
		if !slices.Contains(held, v) {
			return v
		}
	}
	t.Fatalf("every VF of %v is held", vfs)
	return ""
}

// survivesCollections proves that the held VF's device-info file outlives
// three rounds of the agent's collector: three times, it writes a file for
// the free VF, dated an hour back (older than any grace), and waits until
// the collector removed it.
func (e *env) survivesCollections(ctx context.Context, t *testing.T, res corev1.ResourceName, held, free string) {
	t.Helper()
	file := func(id string) string {
		return filepath.Join(devinfoDir, strings.ReplaceAll(string(res), "/", "-")+"-"+id+"-device.json")
	}
	for round := range 3 {
		if _, err := Exec(ctx, e.c, nil, "sh", "-c", fmt.Sprintf(`echo '{}' > %[1]s && touch -d '1 hour ago' %[1]s`, file(free))); err != nil {
			t.Fatal(err)
		}
		mustPoll(ctx, t, fmt.Sprintf("collection %d removed the free VF's file", round+1), func(ctx context.Context) error {
			if _, err := Exec(ctx, e.c, nil, "test", "!", "-e", file(free)); err != nil {
				return fmt.Errorf("%s still there", file(free))
			}
			return nil
		})
		if _, err := Exec(ctx, e.c, nil, "test", "-s", file(held)); err != nil {
			t.Fatalf("after collection %d the held VF's device-info file %s is gone", round+1, file(held))
		}
	}
}

// TestFault_NetdevVanishedAfterItsHolder (issue 29): a VF whose netdev
// vanished while a pod held it is judged lost within a second of the pod
// letting it go, before and after an agent restart: no new pod gets it.
// Once its netdev is back it is healthy again and nothing leaked.
func TestFault_NetdevVanishedAfterItsHolder(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	full := e.pools[sriovResource]
	holder := e.startPod(ctx, t, workloadPod("vanish-holder", "", map[corev1.ResourceName]int64{sriovResource: 1}))
	addr := e.podEnv(ctx, t, holder.Name)[sriovNetdeviceEnv]
	vf, ok := e.c.Node().Device(addr)
	if !ok || vf.Netdev == nil {
		t.Fatalf("VF %s of pod %s: %+v, want a netdev", addr, holder.Name, vf)
	}
	const hideout = "hwnet-e2e-vanished-held"
	if _, err := Exec(ctx, e.c, nil, "ip", "netns", "add", hideout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Exec(context.Background(), e.c, nil, "ip", "netns", "del", hideout) })
	if _, err := Exec(ctx, e.c, nil, "ip", "link", "set", vf.Netdev.Name, "netns", hideout); err != nil {
		t.Fatal(err)
	}
	if err := e.deletePods(ctx, holder.Name); err != nil {
		t.Fatal(err)
	}
	gone := time.Now()
	if judged := e.agentLogged(ctx, t, "device unhealthy", addr); judged.Sub(gone) > time.Second {
		t.Errorf("VF %s judged unhealthy %v after its pod was gone, want within a second", addr, judged.Sub(gone))
	}
	e.noPodGetsEveryVF(ctx, t, "vanish-greedy", full)
	e.restartAgent(ctx, t)
	e.agentLogged(ctx, t, "device unhealthy", addr)
	e.noPodGetsEveryVF(ctx, t, "vanish-greedy-after-restart", full)
	if _, err := Exec(ctx, e.c, nil, "ip", "netns", "del", hideout); err != nil {
		t.Fatal(err)
	}
	e.waitAllocatable(ctx, t, sriovResource, full)
	e.checkNoLeaks(ctx, t, before, true)
}

// noPodGetsEveryVF creates a pod asking for all n VFs of the pool, one of
// which is unhealthy, and waits until kubelet or the scheduler turns it
// away, then deletes it.
func (e *env) noPodGetsEveryVF(ctx context.Context, t *testing.T, name string, n int64) {
	t.Helper()
	e.turnedAway(ctx, t, workloadPod(name, "", map[corev1.ResourceName]int64{sriovResource: n}),
		fmt.Sprintf("its %d VFs, the unhealthy one among them", n))
}

// turnedAway creates pod, which must not get what it asks for (what says
// it), waits until kubelet or the scheduler turns it away, then deletes
// it. A node tainted not-ready (an agent restarting fails the runtime's
// CNI STATUS) turns every pod away, which says nothing of its devices: the
// pod is created once the node has no such taint, and a refusal that
// blames the node's taints does not count.
func (e *env) turnedAway(ctx context.Context, t *testing.T, pod *corev1.Pod, what string) {
	t.Helper()
	mustPoll(ctx, t, "the node's not-ready taints gone", e.noNotReadyTaint)
	e.cleanupPods(t, pod.Name)
	if err := e.create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	mustPoll(ctx, t, "pod "+pod.Name+" refused "+what, func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		switch {
		case p.Status.Phase == corev1.PodRunning:
			t.Fatalf("pod %s runs with %s", pod.Name, what)
		case p.Status.Phase == corev1.PodFailed:
			t.Logf("pod %s failed: %s", pod.Name, p.Status.Message)
			return nil
		case unschedulable(p) && !strings.Contains(scheduledCondition(p).Message, "untolerated taint"):
			t.Logf("pod %s unschedulable: %s", pod.Name, scheduledCondition(p).Message)
			return nil
		}
		return fmt.Errorf("pod is %s", p.Status.Phase)
	})
	if err := e.deletePods(ctx, pod.Name); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func unschedulable(p *corev1.Pod) bool {
	c := scheduledCondition(p)
	return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
}

// scheduledCondition is the pod's PodScheduled condition, zero if none.
func scheduledCondition(p *corev1.Pod) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c
		}
	}
	return corev1.PodCondition{}
}

// agentLogged waits until the running agent's log has a line with msg
// about device and returns the line's time.
func (e *env) agentLogged(ctx context.Context, t *testing.T, msg, device string) time.Time {
	t.Helper()
	var at time.Time
	mustPoll(ctx, t, fmt.Sprintf("agent log %q for %s", msg, device), func(ctx context.Context) error {
		name, err := runningAgent(ctx, e.client, e.c.NodeName())
		if err != nil {
			return err
		}
		out, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "logs", name)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(out)) {
			var rec struct {
				Time   time.Time `json:"time"`
				Msg    string    `json:"msg"`
				Device string    `json:"device"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == msg && rec.Device == device {
				at = rec.Time
				return nil
			}
		}
		return fmt.Errorf("not logged")
	})
	return at
}
