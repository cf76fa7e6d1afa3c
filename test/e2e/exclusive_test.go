package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// Issue 41, "exclusive by construction": every hand-out is one
// reservation in the agent's device ledger, refused while a source of
// holders cannot be read, and a device changing front end or PF layout is
// withdrawn (fenced) meanwhile. These tests run it on the real cluster.

// The taints hwnet puts on a published device that no claim may get
// (docs/dra.md): something else holds it, or who holds it is unknown.
const (
	heldTaintKey    = "hwnet.io/held"
	unknownTaintKey = "hwnet.io/unknown"
)

// dpdkEnv names the VFs of intel.com/sriov_dpdk a container got.
const dpdkEnv = "PCIDEVICE_INTEL_COM_SRIOV_DPDK"

// missingSocket is a PodResources socket no kubelet serves, in kubelet's
// PodResources directory: the agent watches that directory for the
// socket, and its root file system is read-only.
const missingSocket = "/var/lib/kubelet/pod-resources/missing.sock"

// Where the agent keeps a VF layout change's fence (agent.DefaultFenceDir)
// and serves its probes (deploy/hwnet-agent.yaml's --probe-addr).
const (
	fenceDir  = "/var/lib/hwnet/fences"
	probePort = 8141
)

// TestFault_PodResourcesUnreadable (issue 41, the defect as reported): a
// pod without networks holds a VF of intel.com/sriov_dpdk through the
// device plugin; the agent restarts with a PodResources socket it cannot
// read and the pool in DRA mode. A claim for the held VF is never
// allocated; every device of the node is published tainted
// hwnet.io/unknown and the device plugins list none healthy; /readyz
// names the missing source; a claim tolerating the taint is refused at
// prepare, naming why. With the right socket back the held VF is tainted
// hwnet.io/held until its pod goes; then a claim gets it.
func TestFault_PodResourcesUnreadable(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	e.endsAtBaseline(ctx, t)
	e.defaultPoolsAtEnd(t)
	e.agentLogOnFailure(t)
	holder := e.startPod(ctx, t, workloadPod("unread-holder", "", map[corev1.ResourceName]int64{dpdkResource: 1}))
	held := e.podEnv(ctx, t, holder.Name)[dpdkEnv]
	e.createClaimTemplate(ctx, t, "dpdk-held-vf", vfClaim{class: "hwnet-sriov-dpdk", addr: held})
	e.createClaimTemplate(ctx, t, "dpdk-held-vf-tolerating",
		vfClaim{class: "hwnet-sriov-dpdk", addr: held, tolerate: []string{unknownTaintKey}})
	// One restart: the ConfigMap first, then the args, whose change
	// restarts the agent, which reads both.
	e.putPools(ctx, t, draPoolsConfig(t, e.repo))
	restore := e.withAgentArgs(ctx, t, func(a []string) []string { return append(a, "--pod-resources-socket="+missingSocket) })
	e.slices(t, "the DRA pools' devices published", func(d kubeapi.SliceDevices) bool { return len(d) == draDevicesOnNode })
	e.turnedAway(ctx, t, e.draPod(t, claimPodFile, "unread-claim", "dpdk-held-vf"),
		fmt.Sprintf("a claim for VF %s, which pod %s holds", held, holder.Name))
	e.slices(t, "every device tainted "+unknownTaintKey, everyTainted(unknownTaintKey))
	e.waitAllocatable(ctx, t, fabricA, 0)
	e.waitAllocatable(ctx, t, ibResource, 0)
	t.Logf("/readyz: %s", e.waitNotReady(ctx, t, "kubelet PodResources", missingSocket))
	// Deleted once refused: kubelet would try it again only after a
	// backoff of a minute or more.
	tolerating := e.draPod(t, claimPodFile, "unread-tolerating", "dpdk-held-vf-tolerating")
	e.cleanupPods(t, tolerating.Name)
	e.createPod(ctx, t, tolerating)
	t.Log(e.waitEventWith(ctx, t, tolerating.Name, "FailedPrepareDynamicResources",
		"device "+held+": who holds it is unknown", "kubelet PodResources"))
	if err := e.deletePods(ctx, tolerating.Name); err != nil {
		t.Fatal(err)
	}

	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	e.slices(t, "the held VF tainted "+heldTaintKey, heldTaint(held))
	if err := e.deletePods(ctx, holder.Name); err != nil {
		t.Fatal(err)
	}
	e.slices(t, "the VF free once its pod is gone", tainted())
	freed := e.startPod(ctx, t, e.draPod(t, claimPodFile, "unread-freed", "dpdk-held-vf"))
	if got := e.podEnv(ctx, t, freed.Name)[dpdkEnv]; got != held {
		t.Errorf("the claim for %s, freed, got %q", held, got)
	}
	if err := e.deletePods(ctx, freed.Name); err != nil {
		t.Fatal(err)
	}
}

// TestKubeletRestartDuringModeSwitch (issue 41): two pods hold VFs of
// intel.com/sriov_netdevice through the device plugin; the pool switches
// to DRA and kubelet restarts at once, so that the agent serving the
// switched pool sees kubelet go and come back. Claims for one VF each,
// one more than the free VFs, wait meanwhile. No held VF is ever published
// untainted or allocated to a claim: the claims get the free VFs, the one
// too many waits, and the held VFs end tainted hwnet.io/held. Once the
// pods are gone the waiting claim and one more get the VFs they held.
func TestKubeletRestartDuringModeSwitch(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	e.endsAtBaseline(ctx, t)
	e.defaultPoolsAtEnd(t)
	e.agentLogOnFailure(t)
	holders := []string{"krs-holder-0", "krs-holder-1"}
	for _, name := range holders {
		e.startPod(ctx, t, workloadPod(name, "", map[corev1.ResourceName]int64{sriovResource: 1}))
	}
	held := e.heldVFs(ctx, t, holders...)
	offers := e.watchOffers(ctx, t, held)
	e.createClaimTemplate(ctx, t, "krs-one-vf", vfClaim{})
	full := int(e.pools[sriovResource])
	claims := make([]string, full-len(holders)+1)
	for i := range claims {
		claims[i] = fmt.Sprintf("krs-claim-%d", i)
		e.cleanupPods(t, claims[i])
		e.createPod(ctx, t, e.draPod(t, claimPodFile, claims[i], "krs-one-vf"))
	}

	e.switchPools(ctx, t, draPoolsConfig(t, e.repo))
	if err := e.c.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	waiting := e.oneWaits(ctx, t, claims)
	e.slices(t, "the held VFs tainted "+heldTaintKey, heldTaint(held...))
	offers.check(t)

	if err := e.deletePods(ctx, holders...); err != nil {
		t.Fatal(err)
	}
	last := e.startPod(ctx, t, e.draPod(t, claimPodFile, "krs-claim-last", "krs-one-vf"))
	if _, err := e.waitRunning(ctx, waiting, 0); err != nil {
		t.Fatal(err)
	}
	if got := e.heldVFs(ctx, t, waiting, last.Name); !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(held))) {
		t.Errorf("claims of pods %s and %s got %v, want the VFs freed, %v", waiting, last.Name, got, held)
	}
	if err := e.deletePods(ctx, append(claims, last.Name)...); err != nil {
		t.Fatal(err)
	}
}

// oneWaits waits until every pod of names but one runs, and returns that
// one, which the scheduler must turn away: the others hold every free
// device.
func (e *env) oneWaits(ctx context.Context, t *testing.T, names []string) string {
	t.Helper()
	var waiting string
	mustPoll(ctx, t, fmt.Sprintf("all but one of %v Running", names), func(ctx context.Context) error {
		var others []*corev1.Pod
		for _, name := range names {
			p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.Phase != corev1.PodRunning {
				others = append(others, p)
			}
		}
		switch len(others) {
		case 0:
			t.Fatalf("pods %v all run, with more devices than were free: one was given a held one", names)
		case 1:
		default:
			return fmt.Errorf("%d not Running", len(others))
		}
		switch p := others[0]; {
		case unschedulable(p):
			waiting = p.Name
			return nil
		case p.Spec.NodeName != "":
			t.Fatalf("pod %s was scheduled with the free devices taken: it was given a held one", p.Name)
		}
		return fmt.Errorf("pod %s is %s", others[0].Name, others[0].Status.Phase)
	})
	return waiting
}

// TestDRAOffWithClaimPrepared (issue 41): a pod holds a VF of
// intel.com/sriov_netdevice through a claim; the agent restarts without
// --dra, with the pool back in devicePlugin mode. While the claim is
// prepared, the pool's device plugin lists its VF unhealthy: allocatable
// is one short and a pod asking for the whole pool never gets it. The
// claim's pod, deleted, stays Terminating: kubelet cannot unprepare the
// claim without its driver, so the claim still holds the VF, and still no
// pod gets it. Turning DRA on again (docs/dra.md) lets kubelet unprepare
// the claim: the pod goes and allocatable is whole again.
func TestDRAOffWithClaimPrepared(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	e.endsAtBaseline(ctx, t)
	e.defaultPoolsAtEnd(t)
	e.agentLogOnFailure(t)
	e.usePools(ctx, t, draPoolsConfig(t, e.repo))
	e.createClaimTemplate(ctx, t, "draoff-one-vf", vfClaim{})
	claimPod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "draoff-claim", "draoff-one-vf"))
	full := e.pools[sriovResource]

	e.putPools(ctx, t, e.defaultPools(t))
	restore := e.withAgentArgs(ctx, t, func(a []string) []string {
		return slices.DeleteFunc(a, func(arg string) bool { return arg == "--dra" })
	})
	e.waitAllocatable(ctx, t, sriovResource, full-1)
	e.noPodGetsEveryVF(ctx, t, "draoff-every-vf", full)

	if err := e.client.CoreV1().Pods(podNamespace).Delete(ctx, claimPod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitKubeletLogged(ctx, t, "unprepare dynamic resources: DRA driver hwnet.io is not registered", string(claimPod.UID))
	e.noPodGetsEveryVF(ctx, t, "draoff-every-vf-unprepare-failed", full)
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.deletePods(ctx, claimPod.Name); err != nil {
		t.Fatal(err)
	}
	e.waitAllocatable(ctx, t, sriovResource, full)
}

// waitKubeletLogged waits until kubelet's log has a line with every one of
// parts.
func (e *env) waitKubeletLogged(ctx context.Context, t *testing.T, parts ...string) {
	t.Helper()
	log := filepath.Join(e.c.LogDir(), "kubelet.log")
	mustPoll(ctx, t, fmt.Sprintf("kubelet to log %q", parts), func(context.Context) error {
		data, err := os.ReadFile(log)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(data)) {
			if containsAll(line, parts) {
				return nil
			}
		}
		return errors.New("not logged")
	})
}

// TestVFLayoutWithPodArriving (issue 41): the second E810-C's VF layout
// changes from 8 VFs to 4, which removes every VF of the PF (the kernel
// takes sriov_numvfs through 0), while a pod asking for a VF of
// intel.com/sriov_dpdk arrives. The change starts when a pod holding one
// of the PF's VFs goes, with the kernel held: the agent's first write is
// not enacted until the pod's VF is allocated, as a driver slow to remove
// VFs holds it. With the first E810-C's VF 6 taken, the pod's preferred VF
// is one of the changing PF (the NUMA node with the most free VFs); it
// must get the first E810-C's other VF instead, or wait for the layout and
// get a VF present after it: no pod holds a VF the change removes. Until
// the VF layout change fences its PF (node/vflayout), this fails.
func TestVFLayoutWithPodArriving(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	e.endsAtBaseline(ctx, t)
	original := e.defaultPools(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.restoreVFs(ctx, t, original, secondE810)
	})
	e.agentLogOnFailure(t)
	var changing []string
	for _, f := range e.c.Node().Devices() {
		if f.PF == secondE810.addr {
			changing = append(changing, f.Addr)
		}
	}
	blocker := e.startPod(ctx, t, workloadPod("layout-blocker", "", map[corev1.ResourceName]int64{dpdkResource: 1}))
	if vf := e.podEnv(ctx, t, blocker.Name)[dpdkEnv]; slices.Contains(changing, vf) {
		t.Fatalf("pod %s got VF %s of %s, want one of the first E810-C", blocker.Name, vf, secondE810.name)
	}
	holder := e.startPod(ctx, t, workloadPod("layout-holder", "", map[corev1.ResourceName]int64{sriovResource: 1}))
	e.switchPools(ctx, t, withVFLayout(original, secondE810, 4, ""))
	e.waitNodeEvent(ctx, t, "VFLayoutWaiting", secondE810.name, holder.Name)
	resume, err := e.c.PauseVNodeKernel()
	if err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	t.Cleanup(func() { resume() })
	if err := e.deletePods(ctx, holder.Name); err != nil {
		t.Fatal(err)
	}
	e.waitNumVFsWritten(ctx, t, secondE810, 0)

	pod := workloadPod("layout-arriving", "", map[corev1.ResourceName]int64{dpdkResource: 1})
	e.cleanupPods(t, pod.Name)
	e.createPod(ctx, t, pod)
	during := e.allocatedTo(ctx, t, pod.Name, layoutHold)
	if err := resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel held %.1fs; the arriving pod got %v meanwhile", time.Since(paused).Seconds(), during)
	e.waitNodeVFs(ctx, t, secondE810, slices.Repeat([]string{"iavf"}, 4))
	for _, vf := range during {
		if slices.Contains(changing, vf) {
			t.Errorf("pod %s got VF %s of %s while its VF layout changed, which removed it", pod.Name, vf, secondE810.name)
		}
	}
	if _, err := e.waitRunning(ctx, pod.Name, 0); err != nil {
		t.Fatal(err)
	}
	for _, vf := range e.allocatedTo(ctx, t, pod.Name, podTimeout) {
		if _, ok := e.c.Node().Device(vf); !ok {
			t.Errorf("pod %s holds VF %s, which the node no longer has", pod.Name, vf)
		}
	}
	if err := e.deletePods(ctx, pod.Name, blocker.Name); err != nil {
		t.Fatal(err)
	}
}

// layoutHold is how long TestVFLayoutWithPodArriving holds the kernel
// for kubelet to allocate the arriving pod's devices (about a second
// after its creation), well inside the agent's 10 s wait for a sysfs
// write to show, after which it would roll the change back.
const layoutHold = 5 * time.Second

// waitNumVFsWritten waits until the PF's sriov_numvfs reads n: the agent
// wrote it, whether or not the kernel has enacted it.
func (e *env) waitNumVFsWritten(ctx context.Context, t *testing.T, pf layoutPF, n int) {
	t.Helper()
	attr := filepath.Join(e.c.Node().SysRoot(), "bus/pci/devices", pf.addr, "sriov_numvfs")
	mustPoll(ctx, t, fmt.Sprintf("%s written %d", attr, n), func(context.Context) error {
		data, err := os.ReadFile(attr)
		if err == nil && strings.TrimSpace(string(data)) != strconv.Itoa(n) {
			err = fmt.Errorf("it reads %q", data)
		}
		return err
	})
}

// allocatedTo are the devices kubelet's PodResources lists for the pod,
// once it lists any, waiting at most within; nil when it lists none by
// then.
func (e *env) allocatedTo(ctx context.Context, t *testing.T, pod string, within time.Duration) []string {
	t.Helper()
	var got []string
	err := cluster.Poll(ctx, within, "kubelet to allocate pod "+pod+"'s devices", func(ctx context.Context) error {
		resp, err := e.podres.List(ctx, &podresv1.ListPodResourcesRequest{})
		if err != nil {
			return err
		}
		for _, p := range resp.PodResources {
			if p.Namespace != podNamespace || p.Name != pod {
				continue
			}
			for _, c := range p.Containers {
				for _, d := range c.Devices {
					got = append(got, d.DeviceIds...)
				}
			}
		}
		if len(got) == 0 {
			return errors.New("none yet")
		}
		return nil
	})
	if err != nil {
		t.Logf("%v: the pod waits", err)
		return nil
	}
	slices.Sort(got)
	return got
}

// defaultPoolsAtEnd puts the default pools configuration back when the
// test ends and waits until hwnet is ready with it.
func (e *env) defaultPoolsAtEnd(t *testing.T) {
	original := e.defaultPools(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
}

// agentLogOnFailure writes the running agent's last log lines to the
// test's log if the test fails: registered after the cleanup that replaces
// the agent, it runs before it, after those registered later (the test's
// pods deleted).
func (e *env) agentLogOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
		defer cancel()
		name, err := runningAgent(ctx, e.client, e.c.NodeName())
		if err != nil {
			t.Logf("no agent log: %v", err)
			return
		}
		out, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "logs", "--tail=300", name)
		t.Logf("the last lines of hwnet-agent %s's log (%v):\n%s", name, err, out)
	})
}

// everyTainted is a condition: the node's draDevicesOnNode devices are
// published, each with a taint with the key.
func everyTainted(key string) func(kubeapi.SliceDevices) bool {
	return func(d kubeapi.SliceDevices) bool {
		return len(d) == draDevicesOnNode && !slices.ContainsFunc(slices.Collect(maps.Values(d)), func(dev resourceapi.Device) bool {
			return !slices.ContainsFunc(dev.Taints, func(t resourceapi.DeviceTaint) bool { return t.Key == key })
		})
	}
}

// waitNotReady waits until the agent's /readyz answers 503 with a reason
// naming every one of parts, and returns it.
func (e *env) waitNotReady(ctx context.Context, t *testing.T, parts ...string) string {
	t.Helper()
	url := fmt.Sprintf("http://%s:%d/readyz", e.c.NodeIP(), probePort)
	var body string
	mustPoll(ctx, t, fmt.Sprintf("/readyz 503 naming %q", parts), func(ctx context.Context) error {
		out, err := Exec(ctx, e.c, nil, "curl", "-s", "-w", "%{http_code}", url)
		if err != nil {
			return err
		}
		body = string(out)
		if !strings.HasSuffix(body, "503") || !containsAll(body, parts) {
			return fmt.Errorf("it answers %q", body)
		}
		body = strings.TrimSpace(strings.TrimSuffix(body, "503"))
		return nil
	})
	return body
}

// endsAtBaseline checks, once the test's later cleanups have run (its
// pods deleted, the default configuration back), that the node is as it
// was now: its links and attachment files as before; no device held (a
// pod, a claim in the DRA checkpoint, a CNI record) and every source of
// the ledger read; no device-info file of the device plugins and no fence
// left; every pool's allocatable whole.
func (e *env) endsAtBaseline(ctx context.Context, t *testing.T) {
	t.Helper()
	before := e.mustSnapshot(ctx, t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.checkNoLeaks(ctx, t, before, true)
		e.waitUnheld(ctx, t, slices.Collect(maps.Keys(e.pools))...)
		if left, err := e.find(ctx, devinfoDir, fenceDir); err != nil || len(left) > 0 {
			t.Errorf("device-info files and fences left: %v (%v)", left, err)
		}
		if err := WaitHwnetReady(ctx, e.c, e.pools, testWriter{t}); err != nil {
			t.Error(err)
		}
	})
}

// offerWatch records, from informers on the node's ResourceSlices and on
// every ResourceClaim, each time one of its devices was published without
// a taint or allocated to a claim.
type offerWatch struct {
	node    string
	devices []string // device names in the slices
	stop    func()
	mu      sync.Mutex
	seen    []string
	checked bool
}

// watchOffers watches the VFs at addrs being offered until its check, or
// the test's end, which reports what it saw.
func (e *env) watchOffers(ctx context.Context, t *testing.T, addrs []string) *offerWatch {
	t.Helper()
	w := &offerWatch{node: e.c.NodeName()}
	for _, a := range addrs {
		w.devices = append(w.devices, deviceName(a))
	}
	factory := informers.NewSharedInformerFactory(e.client, 0)
	handler := func(check func(any)) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{AddFunc: check, UpdateFunc: func(_, obj any) { check(obj) }}
	}
	for _, reg := range []struct {
		inf   cache.SharedIndexInformer
		check func(any)
	}{
		{factory.Resource().V1().ResourceSlices().Informer(), w.slice},
		{factory.Resource().V1().ResourceClaims().Informer(), w.claim},
	} {
		if _, err := reg.inf.AddEventHandler(handler(reg.check)); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithCancel(context.Background())
	w.stop = sync.OnceFunc(func() {
		cancel()
		factory.Shutdown()
	})
	t.Cleanup(func() { w.check(t) })
	factory.Start(wctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer of %v not synced", typ)
		}
	}
	return w
}

// check stops the watch and fails the test, once, if it saw one of its
// devices offered.
func (w *offerWatch) check(t *testing.T) {
	t.Helper()
	w.stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.seen) > 0 && !w.checked {
		t.Errorf("held devices %v offered:\n%s", w.devices, strings.Join(w.seen, "\n"))
	}
	w.checked = true
}

func (w *offerWatch) slice(obj any) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || s.Spec.NodeName == nil || *s.Spec.NodeName != w.node {
		return
	}
	for _, d := range s.Spec.Devices {
		if slices.Contains(w.devices, d.Name) && len(d.Taints) == 0 {
			w.note("%s published without a taint in ResourceSlice %s (resourceVersion %s)", d.Name, s.Name, s.ResourceVersion)
		}
	}
}

func (w *offerWatch) claim(obj any) {
	c, ok := obj.(*resourceapi.ResourceClaim)
	if !ok || c.Status.Allocation == nil {
		return
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Pool == w.node && slices.Contains(w.devices, r.Device) {
			w.note("%s allocated to claim %s/%s", r.Device, c.Namespace, c.Name)
		}
	}
}

// note records what it saw the first time, with the time: an informer
// hands the same object on at each of its updates.
func (w *offerWatch) note(format string, args ...any) {
	what := fmt.Sprintf(format, args...)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !slices.ContainsFunc(w.seen, func(s string) bool { return strings.HasSuffix(s, " "+what) }) {
		w.seen = append(w.seen, time.Now().Format("15:04:05.000")+": "+what)
	}
}
