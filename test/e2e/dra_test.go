package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// DRA examples of the harness, in test/e2e/testdata/dra.
const (
	draTestdata      = "test/e2e/testdata/dra"
	numaTemplate     = "numa-claim-template.yaml"
	oneVFTemplate    = "one-vf-claim-template.yaml"
	claimPodFile     = "claim-pod.yaml"
	extendedPodFile  = "extended-resource-pod.yaml"
	draReact         = 10 * time.Second
	draDevicesOnNode = 10 // sriov_netdevice's 6 and sriov_dpdk's 4
)

// draPoolsConfig is deploy/pools.yaml with the sriov_netdevice and
// sriov_dpdk pools in DRA mode.
func draPoolsConfig(t *testing.T, repo string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		out = append(out, line)
		entry := strings.TrimSpace(line)
		if strings.HasPrefix(entry, "- resourceName: sriov_netdevice ") || strings.HasPrefix(entry, "- resourceName: sriov_dpdk ") {
			out = append(out, "    mode: dra\n")
		}
	}
	return []byte(strings.Join(out, ""))
}

// usePools puts config in the hwnet-pools ConfigMap, restarts the agent so
// that it reads it at once, and waits until hwnet is ready with it.
func (e *env) usePools(ctx context.Context, t *testing.T, config []byte) {
	t.Helper()
	e.switchPools(ctx, t, config)
	e.waitPools(ctx, t, config)
}

// waitPools waits until every node's agent serves what config gives its
// hardware as it is now: a config whose VF layout changes the hardware
// waits for the layout first.
func (e *env) waitPools(ctx context.Context, t *testing.T, config []byte) {
	t.Helper()
	for _, n := range e.c.Nodes() {
		want, err := ExpectedPools(ctx, n, config)
		if err != nil {
			t.Fatal(err)
		}
		if err := WaitHwnetReady(ctx, n, want, testWriter{t}); err != nil {
			t.Fatal(err)
		}
	}
}

// defaultPools is deploy/pools.yaml, the configuration DeployHwnet uses.
func (e *env) defaultPools(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// restartAgent deletes the hwnet-agent pods, ready or not, and waits until
// its DaemonSet's next one runs and is ready.
func (e *env) restartAgent(ctx context.Context, t *testing.T) {
	t.Helper()
	pods, err := e.client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	for _, p := range pods.Items {
		gone[p.Name] = true
		if err := e.client.CoreV1().Pods(AgentNamespace).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	err = cluster.Poll(ctx, podTimeout, "hwnet-agent pods replaced", func(ctx context.Context) error {
		for _, n := range e.c.Nodes() {
			now, err := runningAgent(ctx, e.client, n.NodeName())
			if err != nil {
				return fmt.Errorf("node %s: %w", n.NodeName(), err)
			}
			if gone[now] {
				return fmt.Errorf("%s still runs", now)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// slices waits until the node's ResourceSlices satisfy cond.
func (e *env) slices(t *testing.T, what string, cond func(kubeapi.SliceDevices) bool) kubeapi.SliceDevices {
	t.Helper()
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + e.c.NodeName()}
	return kubeapi.WaitSliceDevices(t, e.client, onNode, draReact, what, cond)
}

// tainted is a condition: the node has draDevicesOnNode devices, and
// exactly the named ones are tainted.
func tainted(names ...string) func(kubeapi.SliceDevices) bool {
	return func(d kubeapi.SliceDevices) bool {
		if len(d) != draDevicesOnNode {
			return false
		}
		for name, dev := range d {
			if (len(dev.Taints) > 0) != slices.Contains(names, name) {
				return false
			}
		}
		return true
	}
}

// readObject decodes a testdata file into obj.
func readObject(t *testing.T, repo, file string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, draTestdata, file))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// createTemplates creates the claim templates and deletes them at the end.
func (e *env) createTemplates(ctx context.Context, t *testing.T, files ...string) {
	t.Helper()
	templates := e.client.ResourceV1().ResourceClaimTemplates(podNamespace)
	for _, f := range files {
		var tmpl resourceapi.ResourceClaimTemplate
		readObject(t, e.repo, f, &tmpl)
		if _, err := templates.Create(ctx, &tmpl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { templates.Delete(context.Background(), tmpl.Name, metav1.DeleteOptions{}) })
	}
}

// draPod reads a pod of testdata, named name, with template as its claim's
// template when the pod has a claim.
func (e *env) draPod(t *testing.T, file, name, template string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	readObject(t, e.repo, file, &pod)
	pod.Name = name
	for i := range pod.Spec.ResourceClaims {
		pod.Spec.ResourceClaims[i].ResourceClaimTemplateName = &template
	}
	return &pod
}

// startPod runs a pod without network attachments and returns it running.
func (e *env) startPod(ctx context.Context, t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	e.cleanupPods(t, pod.Name)
	running, err := e.runPod(ctx, pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	return running
}

// vfioVFs checks that the container's PCIDEVICE_INTEL_COM_SRIOV_DPDK
// names n vfio-pci VFs of the node on NUMA node numa (-1: any), whose
// VFIO groups the container has as character devices, and returns them.
func (e *env) vfioVFs(ctx context.Context, t *testing.T, pod *corev1.Pod, n, numa int) []string {
	t.Helper()
	env := e.podEnv(ctx, t, pod.Name)
	addrs := strings.Split(env["PCIDEVICE_INTEL_COM_SRIOV_DPDK"], ",")
	if len(addrs) != n || !strings.Contains(env["PCIDEVICE_INTEL_COM_SRIOV_DPDK_INFO"], `"vfio"`) {
		t.Fatalf("pod %s: PCIDEVICE_INTEL_COM_SRIOV_DPDK=%q _INFO=%q, want %d vfio-pci VFs", pod.Name,
			env["PCIDEVICE_INTEL_COM_SRIOV_DPDK"], env["PCIDEVICE_INTEL_COM_SRIOV_DPDK_INFO"], n)
	}
	root := fmt.Sprintf("/proc/%d/root/dev/vfio", e.containerPID(ctx, t, pod))
	for _, addr := range addrs {
		vf, ok := e.c.Node().Device(addr)
		if !ok || vf.Driver != "vfio-pci" || (numa >= 0 && vf.NUMA != numa) {
			t.Errorf("pod %s got %s: %+v, want a vfio-pci VF on NUMA node %d", pod.Name, addr, vf, numa)
			continue
		}
		checkVFIONodes(t, pod.Name, root, vf.IOMMUGroup)
	}
	return addrs
}

// checkVFIONodes checks that the pod's container, whose /dev/vfio is root
// on the host, has the VFIO container and the group's node as character
// devices (from CDI).
func checkVFIONodes(t *testing.T, pod, root string, group int) {
	t.Helper()
	for _, node := range []string{"vfio", fmt.Sprint(group)} {
		if fi, err := os.Stat(filepath.Join(root, node)); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
			t.Errorf("pod %s: /dev/vfio/%s: %v, want a character device (CDI)", pod, node, err)
		}
	}
}

// TestDRA: with two pools in DRA mode, the node's ResourceSlices list
// their devices with every attribute; a claim for two VFs on NUMA node 0
// gets two of that node's VFs, their VFIO nodes and PCIDEVICE_* through
// CDI; an unchanged pod asking intel.com/sriov_dpdk runs on a vfio VF; a
// PF link down taints its VFs and new claims avoid them; an agent restart
// loses nothing of running pods; a kubelet restart registers the driver
// again. The pools go back to device plugins at the end.
func TestDRA(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original, err := os.ReadFile(filepath.Join(e.repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	// A device an earlier pod still holds is published tainted
	// hwnet.io/held, as it must be: the switch waits for every hold to end.
	e.waitUnheld(ctx, t, sriovResource, dpdkResource)
	e.usePools(ctx, t, draPoolsConfig(t, e.repo))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.slices(t, "the DRA pools' devices published", tainted())
	e.createTemplates(ctx, t, numaTemplate, oneVFTemplate)
	t.Run("attributes", func(t *testing.T) { e.checkSliceAttributes(ctx, t) })
	t.Run("claim and extended resource", func(t *testing.T) { e.claimAndExtended(ctx, t) })
	t.Run("PF down taints", func(t *testing.T) { e.taintAvoided(ctx, t) })
	t.Run("agent restart", func(t *testing.T) { e.draAgentRestart(ctx, t) })
	t.Run("kubelet restart", func(t *testing.T) { e.draKubeletRestart(ctx, t) })
}

// sliceAttributes are the attributes every published VF has.
var sliceAttributes = []string{"resource.kubernetes.io/pciBusID", "resource.kubernetes.io/pcieRoot",
	"resource.kubernetes.io/numaNode", "vendor", "device", "model", "pfName", "pfPCIAddress", "vfIndex", "driver",
	"linkType", "rdma", "eswitchMode", "pool", "k8s.cni.cncf.io/resourceName", "k8s.cni.cncf.io/deviceID"}

// checkSliceAttributes: `kubectl get resourceslices -o yaml` shows every
// device with every attribute.
func (e *env) checkSliceAttributes(ctx context.Context, t *testing.T) {
	out, err := Kubectl(ctx, e.c, nil, "get", "resourceslices", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list resourceapi.ResourceSliceList
	if err := yaml.Unmarshal(out, &list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range list.Items {
		for _, d := range s.Spec.Devices {
			n++
			for _, a := range sliceAttributes {
				if _, ok := d.Attributes[resourceapi.QualifiedName(a)]; !ok {
					t.Errorf("device %s has no attribute %s", d.Name, a)
				}
			}
		}
	}
	if n != draDevicesOnNode {
		t.Errorf("kubectl get resourceslices lists %d devices, want %d:\n%s", n, draDevicesOnNode, out)
	}
}

// claimAndExtended runs the claim pod and the extended resource pod side
// by side: the claim takes NUMA node 0's two vfio VFs, the other pod one
// of NUMA node 1's.
func (e *env) claimAndExtended(ctx context.Context, t *testing.T) {
	claimPod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "dra-dpdk", "dpdk-two-vfs-numa0"))
	got := e.vfioVFs(ctx, t, claimPod, 2, 0)
	t.Logf("claim pod: VFs %v", got)
	extended := e.startPod(ctx, t, e.draPod(t, extendedPodFile, "dra-extended", ""))
	got = e.vfioVFs(ctx, t, extended, 1, 1)
	t.Logf("extended resource pod: VF %v", got)
	if err := e.deletePods(ctx, claimPod.Name, extended.Name); err != nil {
		t.Fatal(err)
	}
}

// taintAvoided: the first E810-C's link down taints its VFs in the
// slices; a new claim gets a VF of the other PF; link up untaints.
func (e *env) taintAvoided(ctx context.Context, t *testing.T) {
	if err := e.c.Node().SetLinkUp(ctx, "enp59s0f0", false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.c.Node().SetLinkUp(context.Background(), "enp59s0f0", true) })
	start := time.Now()
	e.slices(t, "PF down taints its VFs", tainted("pci-0000-3b-01-6", "pci-0000-3b-01-7"))
	t.Logf("VFs tainted %v after the PF went down", time.Since(start).Round(time.Millisecond))
	for i := range 2 {
		pod := e.startPod(ctx, t, e.draPod(t, claimPodFile, fmt.Sprintf("dra-avoid-%d", i), "dpdk-one-vf"))
		if got := e.vfioVFs(ctx, t, pod, 1, 1); !strings.HasPrefix(got[0], "0000:3e:") {
			t.Errorf("pod %s got %s, a VF of the PF that is down", pod.Name, got[0])
		}
	}
	if err := e.c.Node().SetLinkUp(ctx, "enp59s0f0", true); err != nil {
		t.Fatal(err)
	}
	e.slices(t, "PF up untaints its VFs", tainted())
	if err := e.deletePods(ctx, "dra-avoid-0", "dra-avoid-1"); err != nil {
		t.Fatal(err)
	}
}

// draAgentRestart: a running claim pod keeps its VFs across an agent
// restart, and its deletion still unprepares the claim: the CDI spec goes.
func (e *env) draAgentRestart(ctx context.Context, t *testing.T) {
	pod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "dra-across-restart", "dpdk-two-vfs-numa0"))
	before := e.vfioVFs(ctx, t, pod, 2, 0)
	// The earlier subtests' claims are unprepared once kubelet has
	// deleted their pods, which may come after the pods are gone from the
	// API server: their specs go then.
	mustPoll(ctx, t, "the claim's CDI spec alone", func(ctx context.Context) error {
		if specs := e.cdiSpecs(ctx, t); len(specs) != 1 {
			return fmt.Errorf("CDI specs %v, want the claim's one", specs)
		}
		return nil
	})
	e.restartAgent(ctx, t)
	e.slices(t, "slices after the agent restart", tainted())
	pod, err := e.waitRunning(ctx, pod.Name, 0)
	if err != nil || pod.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Fatalf("pod after the agent restart: %v, want it Running, never restarted", err)
	}
	if after := e.vfioVFs(ctx, t, pod, 2, 0); !slices.Equal(after, before) {
		t.Errorf("VFs after the agent restart %v, want %v", after, before)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, podTimeout, "the claim's CDI spec removed", func(ctx context.Context) error {
		if left := e.cdiSpecs(ctx, t); len(left) > 0 {
			return fmt.Errorf("CDI specs left: %v", left)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// cdiSpecs lists hwnet's CDI specs in the cluster's /var/run/cdi.
func (e *env) cdiSpecs(ctx context.Context, t *testing.T) []string {
	t.Helper()
	out, err := Exec(ctx, e.c, nil, "find", "/var/run/cdi", "-name", "hwnet.io-*.json")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))
}

// draKubeletRestart: kubelet deletes the node's ResourceSlices when it
// starts; once it registers the driver again the slices are back within
// draReact (the library alone would take 30 s), and a new claim is
// prepared.
func (e *env) draKubeletRestart(ctx context.Context, t *testing.T) {
	if err := e.c.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	e.slices(t, "slices back after the kubelet restart", tainted())
	t.Logf("slices complete %v after kubelet was Ready", time.Since(start).Round(time.Millisecond))
	pod := e.startPod(ctx, t, e.draPod(t, claimPodFile, "dra-after-kubelet-restart", "dpdk-two-vfs-numa0"))
	e.vfioVFs(ctx, t, pod, 2, 0)
	t.Logf("a new claim prepared %v after kubelet was Ready", time.Since(start).Round(time.Millisecond))
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}
