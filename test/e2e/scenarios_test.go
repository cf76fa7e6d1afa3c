package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// testTimeout bounds each scenario.
const testTimeout = 5 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// TestNodeAllocatableShowsEachPool: every pool of deploy/pools.yaml is an
// extended resource of the node with as many devices as the default
// virtual node has for it.
func TestNodeAllocatableShowsEachPool(t *testing.T) {
	e := setup(t)
	node, err := e.client.CoreV1().Nodes().Get(testContext(t), e.c.NodeName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		resource corev1.ResourceName
		want     int64
		devices  string
	}{
		{sriovResource, 6, "VFs 0-5 of enp62s0f0 on iavf"},
		{dpdkResource, 4, "VFs 6-7 of both E810-C PFs, on vfio-pci"},
		{fabricA, 6, "VFs 0-5 of enp59s0f0, tagged fabric-a"},
		{ibResource, 4, "the ConnectX-6's InfiniBand VFs"},
	} {
		t.Run(string(tc.resource), func(t *testing.T) {
			capacity, allocatable := node.Status.Capacity[tc.resource], node.Status.Allocatable[tc.resource]
			if capacity.Value() != tc.want || allocatable.Value() != tc.want {
				t.Errorf("node %s: capacity %s, allocatable %s of %s; want %d (%s)",
					node.Name, capacity.String(), allocatable.String(), tc.resource, tc.want, tc.devices)
			}
		})
	}
}

// TestSpec4_2_SRIOVPodTwoAttachments: a pod holding two VFs selects
// sriov-net twice with "ips" (4.1.2.1.3) and "mac" (4.1.2.1.4). Each
// attachment is its own interface (4.2) holding one of the pod's VFs, the
// network-status (5) lists both after the default network (5.2) and names
// the VFs that PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE names, in its order,
// which are those kubelet allocated.
// Deleting the pod gives the VFs back to the node.
func TestSpec4_2_SRIOVPodTwoAttachments(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	want := []nadv1.NetworkStatus{
		{Name: "default/sriov-net", Interface: "net1", IPs: []string{"10.56.0.10/24"}, Mac: "02:00:00:00:aa:01"},
		{Name: "default/sriov-net", Interface: "net2", IPs: []string{"10.56.0.11/24"}, Mac: "02:00:00:00:aa:02"},
	}
	networks := `[{"name": "sriov-net", "ips": ["10.56.0.10/24"], "mac": "02:00:00:00:aa:01"},
		{"name": "sriov-net", "ips": ["10.56.0.11/24"], "mac": "02:00:00:00:aa:02"}]`
	pod := workloadPod("sriov-two", networks, map[corev1.ResourceName]int64{sriovResource: 2})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, len(want))
	if err != nil {
		t.Fatal(err)
	}
	statuses := networkStatus(t, pod)
	t.Logf("network-status: %s", pod.Annotations[statusKey])
	checkDefaultEntry(t, pod, statuses[0])
	devices := strings.Split(e.podEnv(ctx, t, pod.Name)["PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"], ",")
	if len(devices) != len(want) {
		t.Fatalf("PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE names %v, want %d devices", devices, len(want))
	}
	var held []string
	for _, id := range devices {
		held = append(held, fmt.Sprintf("%s %s %s/%s", sriovResource, id, podNamespace, pod.Name))
	}
	slices.Sort(held)
	if got, err := e.allocated(ctx); err != nil || !slices.Equal(got, held) {
		t.Errorf("kubelet's PodResources lists %v (%v), want the pod's variable's devices %v", got, err, held)
	}
	links := podLinks(t, e.containerPID(ctx, t, pod))
	nodeLinks, err := e.nodeLinks()
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		got := statuses[i+1]
		if got.Name != w.Name || got.Interface != w.Interface || !slices.Equal(got.IPs, w.IPs) || got.Mac != w.Mac {
			t.Errorf("network-status[%d] = %+v, want name %s interface %s ips %v mac %s",
				i+1, got, w.Name, w.Interface, w.IPs, w.Mac)
		}
		if pciAddress(got) != devices[i] {
			t.Errorf("network-status[%d] device-info %+v, want pci-address %s, the %d. of PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE %v",
				i+1, got.DeviceInfo, devices[i], i+1, devices)
		}
		link, ok := links[w.Interface]
		if !ok || link.MAC != w.Mac || !slices.Equal(link.Addrs, w.IPs) {
			t.Errorf("pod netns %s = %+v (present %v), want mac %s addresses %v; links %v", w.Interface, link, ok, w.Mac, w.IPs, links)
		}
		vf, _ := e.c.Node().Device(devices[i])
		if vf.Netdev == nil || slices.Contains(nodeLinks, vf.Netdev.Name) || link.Alias != vf.Netdev.Name {
			t.Errorf("VF %s (%+v): want its netdev moved from the node's netns into the pod as %s, found there with alias %q",
				devices[i], vf.Netdev, w.Interface, link.Alias)
		}
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// checkDefaultEntry: the cluster-wide default network comes first with
// "default": true and the pod IP on eth0 (5.2); addresses carry their
// prefix length, as in 5.4's example.
func checkDefaultEntry(t *testing.T, pod *corev1.Pod, st nadv1.NetworkStatus) {
	t.Helper()
	hasPodIP := slices.ContainsFunc(st.IPs, func(ip string) bool {
		addr, _, _ := strings.Cut(ip, "/")
		return addr == pod.Status.PodIP
	})
	if !st.Default || st.Interface != "eth0" || !hasPodIP {
		t.Errorf("network-status[0] = %+v, want the default network on eth0 with the pod IP %s", st, pod.Status.PodIP)
	}
}

// TestDPDKPodGetsVFIOGroup: a pod holding a vfio-pci VF and selecting
// dpdk-net gets the VF's /dev/vfio/<group> and its PCIDEVICE variable;
// network-status carries the device's device-info (NPWG device-info spec
// 1.1.0), which is all a DPDK application has to find its VF.
func TestDPDKPodGetsVFIOGroup(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("dpdk", "dpdk-net", map[corev1.ResourceName]int64{dpdkResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	statuses := networkStatus(t, pod)
	t.Logf("network-status: %s", pod.Annotations[statusKey])
	addr := e.podEnv(ctx, t, pod.Name)["PCIDEVICE_INTEL_COM_SRIOV_DPDK"]
	vf, ok := e.c.Node().Device(addr)
	if !ok || vf.Driver != "vfio-pci" {
		t.Fatalf("PCIDEVICE_INTEL_COM_SRIOV_DPDK=%q: want one vfio-pci VF of the node, got %+v", addr, vf)
	}
	if got := statuses[1]; got.Name != "default/dpdk-net" || got.DeviceInfo == nil || got.DeviceInfo.Type != "pci" || pciAddress(got) != addr {
		t.Errorf("network-status[1] = %+v device-info %+v, want default/dpdk-net with pci device-info for %s", got, got.DeviceInfo, addr)
	}
	group := filepath.Join(fmt.Sprintf("/proc/%d/root/dev/vfio", e.containerPID(ctx, t, pod)), fmt.Sprint(vf.IOMMUGroup))
	if fi, err := os.Stat(group); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("container's /dev/vfio/%d: %v (%v), want the VF's IOMMU group as a character device", vf.IOMMUGroup, fi, err)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// TestSpec4_1_2_1_InfiniBandGUID: "infiniband-guid" (NPWG v1.2) reaches the
// InfiniBand VF plugin as runtimeConfig infinibandGUID with the pod's VF as
// deviceID, and network-status keeps the plugin's 20-byte IPoIB hardware
// address (RFC 4391 9.1.1), whose last 8 bytes are the GUID (4.1.2.1.4).
// The container gets the VF's RDMA device, which device-info names.
func TestSpec4_1_2_1_InfiniBandGUID(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	plugin := filepath.Join(cniplugins.Dir(t), cniplugins.Recorder)
	if err := InstallCNIPlugin(ctx, e.c, plugin); err != nil {
		t.Fatal(err)
	}
	before := e.mustSnapshot(ctx, t)
	const guid = "00:11:22:33:44:55:66:77"
	pod := workloadPod("ib", `[{"name": "ib-net", "infiniband-guid": "`+guid+`"}]`,
		map[corev1.ResourceName]int64{ibResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	addr := e.podEnv(ctx, t, pod.Name)["PCIDEVICE_NVIDIA_COM_IB"]
	vf, ok := e.c.Node().Device(addr)
	if !ok || vf.LinkType != "infiniband" || vf.RDMA == nil {
		t.Fatalf("PCIDEVICE_NVIDIA_COM_IB=%q: want one InfiniBand VF of the node with an RDMA device, got %+v", addr, vf)
	}
	uverbs := fmt.Sprintf("/proc/%d/root/dev/infiniband/uverbs%d", e.containerPID(ctx, t, pod), vf.RDMA.Uverbs)
	if fi, err := os.Stat(uverbs); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		t.Errorf("container's /dev/infiniband/uverbs%d: %v (%v), want the VF's RDMA device", vf.RDMA.Uverbs, fi, err)
	}
	t.Logf("network-status: %s", pod.Annotations[statusKey])
	got := networkStatus(t, pod)[1]
	mac, err := net.ParseMAC(got.Mac)
	if got.Name != "default/ib-net" || got.Interface != "net1" || err != nil || len(mac) != 20 ||
		!strings.HasSuffix(got.Mac, guid) {
		t.Errorf("network-status[1] = %+v, want default/ib-net on net1 with a 20-byte address ending in the GUID %s", got, guid)
	}
	if pciAddress(got) != addr || got.DeviceInfo.Pci.RdmaDevice != vf.RDMA.Name {
		t.Errorf("network-status[1] device-info %+v, want pci-address %s rdma-device %s", got.DeviceInfo, addr, vf.RDMA.Name)
	}
	// The plugin keeps the deviceID it was given in its state file.
	out, err := Exec(ctx, e.c, nil, "sh", "-c", "cat /var/lib/cni/hwnet-test-plugin/*-net1")
	if err != nil || string(out) != addr {
		t.Errorf("the ib-net plugin was given deviceID %q (%v), want %s", out, err, addr)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// TestPodChurnLeaksNothing: 20 pods, each holding a VF on sriov-net,
// created and deleted in a loop (four at a time): afterwards every VF
// netdev is back in the node's netns, no record, device-info file, lease
// or result cache is left, and kubelet holds no device; and still none
// once kubelet has removed the pods' sandboxes (its garbage collection
// runs DEL again).
func TestPodChurnLeaksNothing(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	const lanes, rounds = 4, 5
	var names []string
	for i := range lanes * rounds {
		names = append(names, fmt.Sprintf("churn-%d", i))
	}
	e.cleanupPods(t, names...)
	uids := make([]types.UID, len(names))
	start := time.Now()
	parallel(t, lanes, func(lane int) error {
		for i := lane * rounds; i < (lane+1)*rounds; i++ {
			networks := fmt.Sprintf(`[{"name": "sriov-net", "ips": ["10.56.1.%d/24"]}]`, i+1)
			pod, err := e.runPod(ctx, workloadPod(names[i], networks, map[corev1.ResourceName]int64{sriovResource: 1}), 1)
			if err != nil {
				return err
			}
			uids[i] = pod.UID
			statuses, err := parseNetworkStatus(pod)
			if err != nil {
				return err
			}
			if pciAddress(statuses[1]) == "" {
				return fmt.Errorf("pod %s: network-status[1] = %+v, want device-info with the VF", names[i], statuses[1])
			}
			if err := e.deletePods(ctx, names[i]); err != nil {
				return err
			}
		}
		return nil
	})
	t.Logf("%d pods created, running and deleted in %.1fs", len(names), time.Since(start).Seconds())
	e.checkNoLeaks(ctx, t, before, true)
	e.waitSandboxesRemoved(ctx, t, uids)
	t.Logf("kubelet removed their sandboxes %.1fs after the first pod was created", time.Since(start).Seconds())
	e.checkNoLeaks(ctx, t, before, true)
}

// waitSandboxesRemoved waits until containerd has no container (sandbox or
// not) of the pods with uids left: kubelet's garbage collection has
// removed them, running the runtime's last DEL.
func (e *env) waitSandboxesRemoved(ctx context.Context, t *testing.T, uids []types.UID) {
	t.Helper()
	err := cluster.Poll(ctx, sandboxGCTimeout, "kubelet to remove the deleted pods' sandboxes", func(ctx context.Context) error {
		for _, uid := range uids {
			out, err := Exec(ctx, e.c, nil, "ctr", "-n", "k8s.io", "containers", "ls", "-q",
				fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s`, uid))
			if err != nil {
				return err
			}
			if ids := strings.Fields(string(out)); len(ids) > 0 {
				return fmt.Errorf("containerd still has %v of pod %s", ids, uid)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// sandboxGCTimeout covers kubelet's container garbage collection, which
// runs every minute.
const sandboxGCTimeout = 90 * time.Second

// TestKubeletRestart: after kubelet restarts, hwnet-agent registers every
// pool with it again (kubelet logs each registration, and its allocatable
// devices and the node's come back), a pod that ran before still runs and
// holds its VF, and a new pod gets a VF and its network.
func TestKubeletRestart(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	old := workloadPod("before-kubelet-restart", `[{"name": "sriov-net", "ips": ["10.56.2.1/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	fresh := workloadPod("after-kubelet-restart", `[{"name": "sriov-net", "ips": ["10.56.2.2/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, old.Name, fresh.Name)
	if _, err := e.runPod(ctx, old, 1); err != nil {
		t.Fatal(err)
	}
	held := e.mustSnapshot(ctx, t).Allocated
	kubeletLog := filepath.Join(e.c.LogDir(), "kubelet.log")
	logged, err := os.Stat(kubeletLog)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = cluster.Poll(ctx, podTimeout, "kubelet to log a device plugin registration of every pool", func(context.Context) error {
		return registeredSince(kubeletLog, logged.Size(), e.pools)
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitKubeletDevices(ctx, t)
	t.Logf("every pool registered again %.1fs after kubelet was Ready", time.Since(start).Seconds())
	if err := WaitHwnetReady(ctx, e.c, e.pools, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	pod, err := e.waitRunning(ctx, old.Name, 1)
	if err != nil || pod.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("pod %s after the kubelet restart: %v, want it still Running, never restarted", old.Name, err)
	}
	// kubelet lists the running pods again a moment after it is Ready.
	err = cluster.Poll(ctx, podTimeout, "kubelet to list the devices held before its restart", func(ctx context.Context) error {
		got, err := e.allocated(ctx)
		if err == nil && !slices.Equal(got, held) {
			err = fmt.Errorf("PodResources lists %v, want %v", got, held)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	if _, err := e.runPod(ctx, fresh, 1); err != nil {
		t.Fatalf("new pod after the kubelet restart: %v", err)
	}
	e.deleteLeavingNothing(ctx, t, before, old.Name, fresh.Name)
}

// waitKubeletDevices waits until kubelet can allocate every device of
// every pool: hwnet-agent's device plugins are registered and serving.
func (e *env) waitKubeletDevices(ctx context.Context, t *testing.T) {
	t.Helper()
	err := cluster.Poll(ctx, podTimeout, "kubelet's allocatable devices "+e.pools.String(), func(ctx context.Context) error {
		got, err := e.kubeletDevices(ctx)
		if err == nil && !maps.Equal(got, e.pools) {
			err = fmt.Errorf("kubelet has %s", got)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// registeredSince checks that kubelet's log, from offset on, has a device
// plugin registration request of every pool. The message is kubelet's
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1/server.go, as of v1.37).
func registeredSince(kubeletLog string, offset int64, pools Pools) error {
	data, err := os.ReadFile(kubeletLog)
	if err != nil {
		return err
	}
	if offset > int64(len(data)) {
		return fmt.Errorf("%s shrank below %d bytes", kubeletLog, offset)
	}
	var missing []string
	for name := range pools {
		line := fmt.Sprintf(`"Got registration request from device plugin with resource" resourceName=%q`, name)
		if !strings.Contains(string(data[offset:]), line) {
			missing = append(missing, string(name))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return fmt.Errorf("no registration of %v in %s since the restart", missing, kubeletLog)
	}
	return nil
}

// TestAgentRestart: with the hwnet-agent pod deleted and its DaemonSet's
// new pod running (its device plugins serving kubelet again), running
// pods keep their VFs and interfaces, and their DEL (from the records the
// old agent wrote) still gives everything back. The node stays Ready
// throughout: the shim's CNI STATUS, which containerd 2.x makes the
// node's network readiness, never fails while the agent restarts (it
// did, and every agent rollout tainted the node not-ready).
func TestAgentRestart(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	networks := `[{"name": "sriov-net", "ips": ["10.56.3.1/24"], "mac": "02:00:00:00:bb:01"}]`
	pod := workloadPod("across-agent-restart", networks, map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pid, linksBefore, held := e.runHolding(ctx, t, pod)
	readySince, status := e.readySince(ctx, t), e.statusProbe(ctx, t)
	e.restartAgent(ctx, t)
	if err := WaitHwnetReady(ctx, e.c, e.pools, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	e.checkStayedReady(ctx, t, "the agent's restart", status, readySince)
	e.waitKubeletDevices(ctx, t)
	if got := podLinks(t, pid)["net1"]; got.MAC != "02:00:00:00:bb:01" || !slices.Equal(got.Addrs, []string{"10.56.3.1/24"}) {
		t.Errorf("pod's net1 after the agent restart = %+v, want as before %+v", got, linksBefore["net1"])
	}
	if got := e.mustSnapshot(ctx, t).Allocated; !slices.Equal(got, held) {
		t.Errorf("allocated devices after the agent restart %v, want as before %v", got, held)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// runHolding runs pod, which holds one VF attachment, and returns its
// container's PID, its links and the node's allocations then: what an
// operation on hwnet must leave as they are.
func (e *env) runHolding(ctx context.Context, t *testing.T, pod *corev1.Pod) (int, map[string]podLink, []string) {
	t.Helper()
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	pid := e.containerPID(ctx, t, pod)
	return pid, podLinks(t, pid), e.mustSnapshot(ctx, t).Allocated
}

// TestDELWithoutAgent: with hwnet-agent stopped (its DaemonSet kept off
// the node), deleting a pod still tears its attachments down: the hwnet
// shim runs the delegates' DEL from the on-disk record, so the VF returns
// to the node and nothing is left. hwnet-agent then comes back.
func TestDELWithoutAgent(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("del-without-agent", `[{"name": "sriov-net", "ips": ["10.56.3.2/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	sandbox := e.sandboxID(ctx, t, pod)
	e.stopAgent(ctx, t)
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
	// The shim logs to the runtime's log (containerd's here) that it did it.
	containerdLog, err := os.ReadFile(filepath.Join(e.c.LogDir(), "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(containerdLog), "containerID="+sandbox+" attachments=") {
		t.Errorf("containerd's log has no DEL of sandbox %s by the hwnet shim from its record", sandbox)
	}
}

// sandboxID is the containerd ID of the pod's sandbox, the CNI container ID.
func (e *env) sandboxID(ctx context.Context, t *testing.T, pod *corev1.Pod) string {
	t.Helper()
	out, err := Exec(ctx, e.c, nil, "ctr", "-n", "k8s.io", "containers", "ls", "-q",
		fmt.Sprintf(`labels."io.kubernetes.pod.uid"==%s,labels."io.cri-containerd.kind"==sandbox`, pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.Fields(string(out))
	if len(ids) != 1 {
		t.Fatalf("pod %s has sandboxes %v, want one", pod.Name, ids)
	}
	return ids[0]
}

// agentOff is a node label no node has: as the DaemonSet's nodeSelector,
// it takes hwnet-agent off every node.
const agentOff = `{"spec": {"template": {"spec": {"nodeSelector": {"hwnet.io/e2e-agent-off": "true"}}}}}`

// stopAgent keeps hwnet-agent off the node until the test ends, and waits
// until its pod is gone.
func (e *env) stopAgent(ctx context.Context, t *testing.T) { e.stopAgentUntil(ctx, t, e.pools) }

// stopAgentUntil takes hwnet-agent off the node and waits until its pod is
// gone; the returned restart, or the test's end, puts it back and waits
// until it offers pools.
func (e *env) stopAgentUntil(ctx context.Context, t *testing.T, pools Pools) (restart func(context.Context) error) {
	t.Helper()
	var once sync.Once
	var err error
	restart = func(ctx context.Context) error {
		once.Do(func() {
			back := `[{"op": "remove", "path": "/spec/template/spec/nodeSelector"}]`
			if _, err = Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "patch", "ds/hwnet-agent", "--type=json", "-p", back); err == nil {
				err = WaitHwnetReady(ctx, e.c, pools, testWriter{t})
			}
		})
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
		defer cancel()
		if err := restart(ctx); err != nil {
			t.Error(err)
		}
	})
	if _, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "patch", "ds/hwnet-agent", "-p", agentOff); err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, podTimeout, "no hwnet-agent pod on the node", func(ctx context.Context) error {
		pods, err := e.client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
		if err == nil && len(pods.Items) > 0 {
			err = fmt.Errorf("%s is %s", pods.Items[0].Name, pods.Items[0].Status.Phase)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return restart
}

// TestSpec4_1_2_BadSelections: a pod whose networks annotation hwnet cannot
// honour never starts without its networks: it stays ContainerCreating,
// gets a Warning Event from hwnet naming the problem, and leaves no link
// moved, no record and no device-info file; deleting it frees its devices.
func TestSpec4_1_2_BadSelections(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	cases := []struct {
		name     string
		networks string
		devices  int64
		reason   string
		message  string // the Event's message names it
	}{
		{"4.1.2.1.1 missing NAD", `[{"name": "no-such-net"}]`, 0, "NetworkNotFound", "no-such-net"},
		{"4.1.2.1.4 invalid mac", `[{"name": "sriov-net", "ips": ["10.56.4.1/24"], "mac": "zz:11"}]`, 1,
			"InvalidNetworksAnnotation", `"zz:11"`},
		{"4.1.2.1.5 duplicate interface", `[{"name": "sriov-net", "interface": "data1", "ips": ["10.56.4.2/24"]},
			{"name": "sriov-net", "interface": "data1", "ips": ["10.56.4.3/24"]}]`, 2, "InvalidNetworksAnnotation", "data1"},
		{"more networks than devices", "sriov-net,sriov-net", 1, "NotEnoughDevices", string(sriovResource)},
	}
	var names []string
	for i := range cases {
		names = append(names, fmt.Sprintf("bad-%d", i))
	}
	e.cleanupPods(t, names...)
	for i, tc := range cases {
		devices := map[corev1.ResourceName]int64{}
		if tc.devices > 0 {
			devices[sriovResource] = tc.devices
		}
		e.createPod(ctx, t, workloadPod(names[i], tc.networks, devices))
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			event := e.waitEvent(ctx, t, names[i], tc.reason)
			t.Logf("Event %s from %s: %s", event.Reason, event.Source.Component, event.Message)
			if event.Source.Component != "hwnet" || !strings.Contains(event.Message, tc.message) {
				t.Errorf("Event %s from %q: %q, want one from hwnet naming %s", tc.reason, event.Source.Component, event.Message, tc.message)
			}
			e.checkContainerCreating(ctx, t, names[i])
		})
	}
	e.checkNoLeaks(ctx, t, before, false)
	e.deleteLeavingNothing(ctx, t, before, names...)
}

// waitEvent waits for the pod's Warning Event with reason.
func (e *env) waitEvent(ctx context.Context, t *testing.T, pod, reason string) corev1.Event {
	t.Helper()
	var event corev1.Event
	err := cluster.Poll(ctx, podTimeout, "a Warning Event "+reason+" of pod "+pod, func(ctx context.Context) error {
		events, err := e.podEvents(ctx, pod, reason)
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return fmt.Errorf("none yet%s", e.lastEvent(ctx, pod))
		}
		event = events[len(events)-1]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return event
}

// checkContainerCreating: the pod is Pending with its container waiting
// in ContainerCreating, as kubelet shows a sandbox whose network failed
// (kubelet may post that status after hwnet's Event).
func (e *env) checkContainerCreating(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	err := cluster.Poll(ctx, podTimeout, "pod "+name+" Pending in ContainerCreating", func(ctx context.Context) error {
		pod, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		statuses := pod.Status.ContainerStatuses
		if pod.Status.Phase != corev1.PodPending || len(statuses) != 1 || statuses[0].State.Waiting == nil ||
			statuses[0].State.Waiting.Reason != "ContainerCreating" {
			return fmt.Errorf("pod is %s with containers %+v", pod.Status.Phase, statuses)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
