package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// The multi-node suite runs on setupMulti's cluster: the control plane's
// node and worker w1 have the default virtual SR-IOV hardware, worker w2
// has none. Its tests are named TestMultiNode_*, so that -run selects
// them; TestMultiNode_ZNodeDrainedAndDeleted removes w1 and runs last.
const (
	hostnameLabel = "kubernetes.io/hostname"
	servePort     = "8080"
	// drainedWait bounds the wait for a drained node's sandboxes to be
	// torn down: two rounds of kubelet's sandbox garbage collection.
	drainedWait = 150 * time.Second
)

// multiNodes names the cluster's nodes: the control plane's, the worker
// with SR-IOV hardware and the one without.
func (e *env) multiNodes(t *testing.T) (cp, sriov, plain *cluster.Cluster) {
	t.Helper()
	nodes := e.c.Nodes()
	if len(nodes) != multiNodes {
		t.Fatalf("the multi-node cluster has %d nodes, want %d", len(nodes), multiNodes)
	}
	return nodes[0], nodes[1], nodes[2]
}

// onNode pins pod to the node by its hostname label, as a user would; the
// scheduler still checks that the node fits.
func onNode(pod *corev1.Pod, node string) *corev1.Pod {
	pod.Spec.NodeSelector = map[string]string{hostnameLabel: node}
	return pod
}

// sriovNet selects sriov-net as net1 with an address of its own for node
// index: the NAD's IPAM is static.
func sriovNet(index int) string {
	return fmt.Sprintf(`[{"name":"sriov-net","interface":"net1","ips":["10.56.%d.10/24"]}]`, index)
}

// servePod serves its hostname on servePort on the default network.
func servePod(name string) *corev1.Pod {
	pod := workloadPod(name, "", nil)
	pod.Spec.Containers[0].Command = []string{"/workload", "serve", servePort}
	return pod
}

// dialPod connects to addr once and ends: Succeeded when it read the
// answer.
func dialPod(name, addr string) *corev1.Pod {
	pod := workloadPod(name, "", nil)
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].Command = []string{"/workload", "dial", addr}
	return pod
}

// waitPhase waits until the pod reaches phase; a pod that ends in the
// other final phase fails the test at once.
func (e *env) waitPhase(ctx context.Context, t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	var ended error
	mustPoll(ctx, t, "pod "+name+" "+string(phase), func(ctx context.Context) error {
		pod, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case pod.Status.Phase == phase:
			return nil
		case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
			ended = fmt.Errorf("pod %s ended %s, want %s%s", name, pod.Status.Phase, phase, e.lastEvent(ctx, name))
			return nil
		}
		return fmt.Errorf("pod is %s%s", pod.Status.Phase, e.lastEvent(ctx, name))
	})
	if ended != nil {
		t.Fatal(ended)
	}
}

// TestMultiNode_DefaultNetworkAcrossNodes: a pod on each node serves on
// the default network and a pod on the next node reaches it, the node
// without SR-IOV hardware included: hwnet's CNI side attaches the default
// network there as everywhere, and the network-status it writes says so.
func TestMultiNode_DefaultNetworkAcrossNodes(t *testing.T) {
	e := setupMulti(t)
	ctx := testContext(t)
	nodes := e.c.Nodes()
	servers := make([]*corev1.Pod, len(nodes))
	for i, n := range nodes {
		name := fmt.Sprintf("mn-serve-%d", i)
		e.cleanupPods(t, name)
		running, err := e.runPod(ctx, onNode(servePod(name), n.NodeName()), 0)
		if err != nil {
			t.Fatal(err)
		}
		// The spec's network-status examples give addresses with their prefix.
		if st := networkStatus(t, running); len(st) != 1 || !st[0].Default || len(st[0].IPs) != 1 ||
			!strings.HasPrefix(st[0].IPs[0], running.Status.PodIP+"/") {
			t.Errorf("pod %s on %s: network-status %+v, want the default network with the pod IP %s", name, n.NodeName(), st, running.Status.PodIP)
		}
		servers[i] = running
	}
	for i, n := range nodes {
		server := servers[(i+1)%len(nodes)]
		name := fmt.Sprintf("mn-dial-%d", i)
		e.cleanupPods(t, name)
		e.createPod(ctx, t, onNode(dialPod(name, server.Status.PodIP+":"+servePort), n.NodeName()))
		e.waitPhase(ctx, t, name, corev1.PodSucceeded)
		t.Logf("pod on %s reached %s on %s", n.NodeName(), server.Status.PodIP, server.Spec.NodeName)
	}
}

// TestMultiNode_DevicePodsGoWhereDevicesAreFree: pods that each need more
// than half of a node's VFs land one per node with SR-IOV hardware, never
// on the node without, and the next such pod waits for devices: first
// through the device plugin, then with the pools in DRA mode, where the
// scheduler reads the nodes' ResourceSlices.
func TestMultiNode_DevicePodsGoWhereDevicesAreFree(t *testing.T) {
	e := setupMulti(t)
	ctx := testContext(t)
	cp, sriov, plain := e.multiNodes(t)
	half := e.pools[sriovResource]/2 + 1
	t.Run("device plugin", func(t *testing.T) {
		e.spreadOnce(ctx, t, "mn-dp", []string{cp.NodeName(), sriov.NodeName()}, plain.NodeName(), func(name string) *corev1.Pod {
			return workloadPod(name, "", map[corev1.ResourceName]int64{sriovResource: half})
		})
	})
	t.Run("DRA", func(t *testing.T) {
		e.usePools(ctx, t, draPoolsConfig(t, e.repo))
		t.Cleanup(func() { e.usePools(context.Background(), t, e.defaultPools(t)) })
		e.createCountTemplate(ctx, t, "mn-half", half)
		e.spreadOnce(ctx, t, "mn-dra", []string{cp.NodeName(), sriov.NodeName()}, plain.NodeName(), func(name string) *corev1.Pod {
			pod := workloadPod(name, "", nil)
			pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "vfs", ResourceClaimTemplateName: new("mn-half")}}
			pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "vfs"}}
			return pod
		})
	})
}

// spreadOnce creates one pod per node of want, then one more: the first
// run one per node of want, the last stays Pending for want of devices,
// and none goes to never.
func (e *env) spreadOnce(ctx context.Context, t *testing.T, prefix string, want []string, never string, pod func(string) *corev1.Pod) {
	t.Helper()
	var names []string
	for i := range len(want) + 1 {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	e.cleanupPods(t, names...)
	var got []string
	for _, name := range names[:len(want)] {
		running, err := e.runPod(ctx, pod(name), 0)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, running.Spec.NodeName)
	}
	slices.Sort(got)
	if !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("pods ran on %v, want one on each of %v (never on %s)", got, want, never)
	}
	last := names[len(want)]
	e.createPod(ctx, t, pod(last))
	var placed string
	mustPoll(ctx, t, "pod "+last+" unschedulable", func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, last, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if placed = p.Spec.NodeName; placed != "" {
			return nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
				t.Logf("%s: %s", last, c.Message)
				return nil
			}
		}
		return errors.New("not yet judged unschedulable")
	})
	if placed != "" {
		t.Errorf("pod %s went to %s, want it Pending: no node has the devices left", last, placed)
	}
}

// createCountTemplate creates a claim template for count netdev VFs.
func (e *env) createCountTemplate(ctx context.Context, t *testing.T, name string, count int64) {
	t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNamespace},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "vfs", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: "hwnet-sriov-netdevice", AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}},
		}}},
	}
	templates := e.client.ResourceV1().ResourceClaimTemplates(podNamespace)
	if _, err := templates.Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { templates.Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// TestMultiNode_OneNetworkOnTwoNodes: pods on the two SR-IOV nodes attach
// to one NAD and to one KEP-3698 PodNetwork, each on its own node's VF.
func TestMultiNode_OneNetworkOnTwoNodes(t *testing.T) {
	e := setupMulti(t)
	ctx := testContext(t)
	cp, sriov, _ := e.multiNodes(t)
	e.multinet(ctx, t)
	for _, n := range []*cluster.Cluster{cp, sriov} {
		nad := onNode(workloadPod("mn-nad-"+n.NodeName(), sriovNet(n.Index()),
			map[corev1.ResourceName]int64{sriovResource: 1}), n.NodeName())
		kep := onNode(referencingPod("mn-kep-"+n.NodeName(), `[{"name":"dataplane","interfaceName":"net1"}]`), n.NodeName())
		for _, pod := range []*corev1.Pod{nad, kep} {
			e.cleanupPods(t, pod.Name)
			running, err := e.runPod(ctx, pod, 1)
			if err != nil {
				t.Fatal(err)
			}
			st := networkStatus(t, running)
			if running.Spec.NodeName != n.NodeName() || len(st) != 2 || st[1].Interface != "net1" || pciAddress(st[1]) == "" {
				t.Errorf("pod %s on %s: network-status %+v, want net1 on a VF of node %s", pod.Name, running.Spec.NodeName, st, n.NodeName())
			}
		}
	}
}

// TestMultiNode_AgentTokenStaysOnItsNode: the token the control plane's
// hwnet-agent really runs with writes its own node's pods and slices and
// is refused those of another node, by the API server's policies.
func TestMultiNode_AgentTokenStaysOnItsNode(t *testing.T) {
	e := setupMulti(t)
	ctx := testContext(t)
	cp, sriov, _ := e.multiNodes(t)
	mine := e.runOnNode(ctx, t, "mn-sec-mine", cp.NodeName())
	theirs := e.runOnNode(ctx, t, "mn-sec-theirs", sriov.NodeName())
	agent, err := kubernetes.NewForConfig(e.podTokenOn(ctx, t, AgentNamespace, AgentSelector, cp.NodeName()))
	if err != nil {
		t.Fatal(err)
	}
	// The one write the agent's pod policy allows, the network-status.
	body := fmt.Sprintf(`{"metadata":{"annotations":{%q:"[]"}}}`, statusKey)
	// A slice of the other node, as its agent would publish in DRA mode.
	adminSlices := e.client.ResourceV1().ResourceSlices()
	theirSlice, err := adminSlices.Create(ctx, secSlice("mn-sec-their-slice", dra.DefaultDriverName, sriov.NodeName()), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adminSlices.Delete(context.Background(), theirSlice.Name, metav1.DeleteOptions{}) })
	runSecWrites(ctx, t, []secWrite{
		{name: "annotate a pod on its node", do: func(ctx context.Context) error { return secPatch(ctx, agent, mine, body) }},
		{name: "annotate a pod on another node", refused: "forbidden",
			do: func(ctx context.Context) error { return secPatch(ctx, agent, theirs, body) }},
		{name: "create a slice of another node", refused: "forbidden", do: func(ctx context.Context) error {
			_, err := agent.ResourceV1().ResourceSlices().Create(ctx, secSlice("mn-sec-new", dra.DefaultDriverName, sriov.NodeName()), metav1.CreateOptions{})
			return err
		}},
		{name: "delete another node's slice", refused: "forbidden", do: func(ctx context.Context) error {
			return agent.ResourceV1().ResourceSlices().Delete(ctx, theirSlice.Name, metav1.DeleteOptions{})
		}},
	})
}

// runOnNode runs a workload pod without networks on node and returns its
// name.
func (e *env) runOnNode(ctx context.Context, t *testing.T, name, node string) string {
	t.Helper()
	e.cleanupPods(t, name)
	if _, err := e.runPod(ctx, onNode(workloadPod(name, "", nil), node), 0); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestMultiNode_RollingAgentUpgrade: the agent DaemonSet rolls across the
// nodes with its update strategy while pods hold VFs on two nodes: every
// pod keeps its VF and network-status, and a pod started after the
// rollout gets VFs no running pod holds.
func TestMultiNode_RollingAgentUpgrade(t *testing.T) {
	e := setupMulti(t)
	ctx := testContext(t)
	cp, sriov, _ := e.multiNodes(t)
	held := map[string]*corev1.Pod{}
	for _, n := range []*cluster.Cluster{cp, sriov} {
		pod := onNode(workloadPod("mn-roll-"+n.NodeName(), sriovNet(n.Index()),
			map[corev1.ResourceName]int64{sriovResource: 1}), n.NodeName())
		e.cleanupPods(t, pod.Name)
		running, err := e.runPod(ctx, pod, 1)
		if err != nil {
			t.Fatal(err)
		}
		held[n.NodeName()] = running
	}
	e.rollAgents(ctx, t)
	for node, before := range held {
		now, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, before.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if now.Status.Phase != corev1.PodRunning || now.UID != before.UID || now.Annotations[statusKey] != before.Annotations[statusKey] {
			t.Errorf("pod %s on %s after the rollout: %s, network-status %s; want it running as before with %s",
				before.Name, node, now.Status.Phase, now.Annotations[statusKey], before.Annotations[statusKey])
		}
		if _, ok := podLinks(t, e.containerPID(ctx, t, now))["net1"]; !ok {
			t.Errorf("pod %s on %s lost net1 in the rollout", before.Name, node)
		}
		after := onNode(workloadPod("mn-after-"+node, "", map[corev1.ResourceName]int64{sriovResource: e.pools[sriovResource] - 1}), node)
		e.cleanupPods(t, after.Name)
		running, err := e.runPod(ctx, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		vfs := e.podEnv(ctx, t, running.Name)["PCIDEVICE_INTEL_COM_SRIOV_NETDEVICE"]
		if mine := pciAddress(networkStatus(t, now)[1]); mine == "" || strings.Contains(vfs, mine) {
			t.Errorf("pod %s on %s got VFs %s, one of them %s, which pod %s holds", after.Name, node, vfs, mine, before.Name)
		}
	}
}

// rollAgents changes the agent DaemonSet's pod template, as an upgrade
// does, and waits until its rollout is complete on every node.
func (e *env) rollAgents(ctx context.Context, t *testing.T) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"hwnet.io/e2e-rollout":%q}}}}}`, t.Name())
	if _, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "patch", "daemonset/hwnet-agent", "-p", patch); err != nil {
		t.Fatal(err)
	}
	out, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "rollout", "status", "daemonset/hwnet-agent",
		"--timeout="+(2*podTimeout).String())
	if err != nil {
		t.Fatalf("agent rollout: %v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestMultiNode_ControllerLeaderKilled: hwnet-controller's two replicas
// run on different nodes. Twice a pod waits behind the scheduling gate for
// a PodNetwork that does not exist yet while the leader fails; the network
// is then created and the pod must run:
//   - killed (SIGKILL): kubelet restarts the container, whose identity in
//     the Lease is its pod's name, so it leads again at once;
//   - hung (SIGSTOP, as a frozen node): the other replica takes the Lease
//     once it expires (15 s) and lifts the gate.
//
// Each time from the failure to the pod running is logged.
func TestMultiNode_ControllerLeaderKilled(t *testing.T) {
	e := setupMulti(t)
	ctx := testContext(t)
	cp, _, _ := e.multiNodes(t)
	leader, other := e.controllerReplicas(ctx, t)
	if leader.Spec.NodeName == other.Spec.NodeName {
		t.Errorf("hwnet-controller's replicas %s and %s both run on %s, want them on different nodes",
			leader.Name, other.Name, leader.Spec.NodeName)
	}
	gated := func(name, network string) *corev1.Pod {
		pod := onNode(referencingPod(name, fmt.Sprintf(`[{"name":%q,"interfaceName":"net1"}]`, network)), cp.NodeName())
		e.cleanupPods(t, pod.Name)
		e.createPod(ctx, t, pod)
		e.waitGated(ctx, t, pod.Name)
		return pod
	}
	killed := gated("mn-gated-killed", "dataplane")
	e.signalController(ctx, t, leader, syscall.SIGKILL)
	e.multinet(ctx, t)
	e.waitLifted(ctx, t, killed, "leader "+leader.Name+" killed")

	leader, other = e.controllerReplicas(ctx, t)
	hung := gated("mn-gated-hung", "dataplane-late")
	e.signalController(ctx, t, leader, syscall.SIGSTOP)
	t.Cleanup(func() { e.signalController(context.Background(), t, leader, syscall.SIGCONT) })
	e.applyLatePodNetwork(ctx, t, "dataplane-late")
	e.waitLifted(ctx, t, hung, "leader "+leader.Name+" hung")
	lease, err := e.client.CoordinationV1().Leases(AgentNamespace).Get(ctx, "hwnet-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder := lease.Spec.HolderIdentity; holder == nil || *holder != other.Name {
		t.Errorf("the Lease is held by %v, want the other replica %s", holder, other.Name)
	}
}

// signalController signals the controller container of pod, wherever it
// runs: every node's processes are on this machine.
func (e *env) signalController(ctx context.Context, t *testing.T, pod *corev1.Pod, sig syscall.Signal) {
	t.Helper()
	now, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(e.containerPID(ctx, t, now), sig); err != nil {
		t.Fatalf("%v to %s: %v", sig, pod.Name, err)
	}
}

// waitLifted waits until pod runs with its network and logs how long that
// took since what happened.
func (e *env) waitLifted(ctx context.Context, t *testing.T, pod *corev1.Pod, what string) {
	t.Helper()
	since := time.Now()
	running, err := e.waitRunning(ctx, pod.Name, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: pod %s running on %s %.1fs after its network was created", what, pod.Name, running.Spec.NodeName,
		time.Since(since).Seconds())
}

// applyLatePodNetwork creates a PodNetwork on the scenario's NAD.
func (e *env) applyLatePodNetwork(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	pn := fmt.Sprintf(`apiVersion: multinetwork.hwnet.io/v1alpha1
kind: PodNetwork
metadata: {name: %s}
spec:
  provider: hwnet.io/cni
  parametersRefs:
    - {group: k8s.cni.cncf.io, kind: NetworkAttachmentDefinition, namespace: default, name: sriov-dataplane}
`, name)
	if _, err := Kubectl(ctx, e.c, []byte(pn), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Kubectl(context.Background(), e.c, []byte(pn), "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	})
}

// TestMultiNode_ZNodeDrainedAndDeleted: worker w1 is drained, its kubelet
// stopped and its Node deleted, as an operator retires a node: its pods'
// attachment records and its ResourceSlices go; the other nodes' slices
// and pods are untouched. It runs last and takes the cluster down: the node
// does not come back, and the single-node tests after it run alone.
func TestMultiNode_ZNodeDrainedAndDeleted(t *testing.T) {
	e := setupMulti(t)
	t.Cleanup(func() {
		if err := multi.tearDown(); err != nil {
			t.Error(err)
		}
	})
	ctx := testContext(t)
	cp, sriov, _ := e.multiNodes(t)
	e.usePools(ctx, t, draPoolsConfig(t, e.repo))
	stays := e.runOnNode(ctx, t, "mn-stays", cp.NodeName())
	goes := e.runOnNode(ctx, t, "mn-goes", sriov.NodeName())
	cpSlices := e.nodeSlices(ctx, t, cp.NodeName())
	if len(e.nodeSlices(ctx, t, sriov.NodeName())) == 0 || len(cpSlices) == 0 {
		t.Fatal("the SR-IOV nodes publish no ResourceSlices in DRA mode")
	}
	if out, err := Kubectl(ctx, e.c, nil, "get", "pods", "-A", "-o", "wide", "--field-selector", "spec.nodeName="+sriov.NodeName()); err == nil {
		t.Logf("pods on %s before the drain:\n%s", sriov.NodeName(), out)
	}
	if out, err := Kubectl(ctx, e.c, nil, "drain", sriov.NodeName(), "--ignore-daemonsets", "--force",
		"--timeout="+podTimeout.String()); err != nil {
		t.Fatalf("drain: %v\n%s", err, out)
	}
	mustPoll(ctx, t, "pod "+goes+" gone", func(ctx context.Context) error {
		_, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, goes, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errors.Join(err, errors.New("still there"))
	})
	// An evicted pod is gone once its containers are; its sandbox's DEL
	// may still run, and one that failed (the agent restarting, say) runs
	// again at kubelet's next sandbox garbage collection, every minute.
	drained := &env{c: sriov}
	err := cluster.Poll(ctx, drainedWait, "the drained node's attachment files gone", func(ctx context.Context) error {
		files, err := drained.attachmentFiles(ctx)
		if err == nil && len(files) > 0 {
			err = fmt.Errorf("left: %v", files)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
	if err := sriov.StopKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Nodes().Delete(ctx, sriov.NodeName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustPoll(ctx, t, "the deleted node's ResourceSlices gone", func(ctx context.Context) error {
		if left := e.nodeSlices(ctx, t, sriov.NodeName()); len(left) > 0 {
			return fmt.Errorf("%d left", len(left))
		}
		return nil
	})
	if now := e.nodeSlices(ctx, t, cp.NodeName()); !slices.Equal(now, cpSlices) {
		t.Errorf("the control plane's slices changed: %v, were %v", now, cpSlices)
	}
	e.waitPhase(ctx, t, stays, corev1.PodRunning)
}

// nodeSlices names the node's ResourceSlices of hwnet's driver with their
// generation, sorted.
func (e *env) nodeSlices(ctx context.Context, t *testing.T, node string) []string {
	t.Helper()
	list, err := e.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		if s.Spec.Driver == dra.DefaultDriverName {
			names = append(names, fmt.Sprintf("%s@%d", s.Name, s.Generation))
		}
	}
	slices.Sort(names)
	return names
}

// controllerReplicas returns the hwnet-controller pod holding the Lease and
// the other one, both running.
func (e *env) controllerReplicas(ctx context.Context, t *testing.T) (leader, other *corev1.Pod) {
	t.Helper()
	mustPoll(ctx, t, "hwnet-controller's two replicas running, one leading", func(ctx context.Context) error {
		lease, err := e.client.CoordinationV1().Leases(AgentNamespace).Get(ctx, "hwnet-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, err := e.client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=hwnet-controller"})
		if err != nil {
			return err
		}
		leader, other = nil, nil
		for i := range pods.Items {
			p := &pods.Items[i]
			switch {
			case p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil:
			case lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == p.Name:
				leader = p
			default:
				other = p
			}
		}
		if leader == nil || other == nil {
			return fmt.Errorf("leader %v, other %v of %d pods", leader != nil, other != nil, len(pods.Items))
		}
		return nil
	})
	return leader, other
}

// waitGated waits until the pod carries the multi-network scheduling gate.
func (e *env) waitGated(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	mustPoll(ctx, t, "pod "+name+" gated", func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == mnv1.SchedulingGate {
				return nil
			}
		}
		return fmt.Errorf("gates %v", p.Spec.SchedulingGates)
	})
}
