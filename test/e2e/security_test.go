package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// elsewhere is a node the cluster does not have: objects "of another node"
// name it, so nothing runs them.
const elsewhere = "hwnet-sec-elsewhere"

// podToken returns a client configuration with a token of the pod's
// service account bound to the running pod, as kubelet mounts it in the
// pod: it names the pod's node. Taken by TokenRequest rather than read
// out of the container, whose image has no shell.
func (e *env) podToken(ctx context.Context, t *testing.T, namespace, selector string) *rest.Config {
	t.Helper()
	return e.podTokenOn(ctx, t, namespace, selector, "")
}

// podTokenOn is podToken for a pod on node ("" for any node).
func (e *env) podTokenOn(ctx context.Context, t *testing.T, namespace, selector, node string) *rest.Config {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: selector}
	if node != "" {
		opts.FieldSelector = "spec.nodeName=" + node
	}
	pods, err := e.client.CoreV1().Pods(namespace).List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil {
			continue
		}
		base, err := e.c.RESTConfig()
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := kubeapi.PodToken(ctx, e.client, base, &p)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Fatalf("no running pod %s in %s", selector, namespace)
	return nil
}

// secWrite is one write of the matrix: allowed when refused is empty,
// else refused with an error containing refused (kubeapi.CheckWrite).
type secWrite struct {
	name, refused string
	do            func(ctx context.Context) error
}

func runSecWrites(ctx context.Context, t *testing.T, writes []secWrite) {
	t.Helper()
	for _, w := range writes {
		kubeapi.CheckWrite(t, w.name, w.refused, w.do(ctx))
	}
}

func secSlice(name, driver, node string) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, NodeName: new(node),
			Pool: resourcev1.ResourcePool{Name: name, ResourceSliceCount: 1}}}
}

// secClaim is a claim allocated, as the scheduler would, to node with one
// device of driver.
func (e *env) secClaim(ctx context.Context, t *testing.T, name, driver, node string) {
	t.Helper()
	claims := e.client.ResourceV1().ResourceClaims(podNamespace)
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "hwnet"}}}}}}
	c, err := claims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { claims.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	c.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "dev", Driver: driver, Pool: node, Device: "sec-0"}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	if _, err := claims.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func claimDeviceStatus(ctx context.Context, client kubernetes.Interface, claim, driver, pool string) error {
	ac := resourceac.ResourceClaim(claim, podNamespace).WithStatus(resourceac.ResourceClaimStatus().WithDevices(
		resourceac.AllocatedDeviceStatus().WithDriver(driver).WithPool(pool).WithDevice("sec-0").
			WithNetworkData(resourceac.NetworkDeviceData().WithInterfaceName("net1"))))
	_, err := client.ResourceV1().ResourceClaims(podNamespace).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: "hwnet", Force: true})
	return err
}

func secEvent(ctx context.Context, client kubernetes.Interface, about corev1.ObjectReference, host string) error {
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "hwnet-sec-", Namespace: podNamespace},
		InvolvedObject: about, Reason: "SecurityTest", Message: "e2e", Type: corev1.EventTypeNormal,
		Source: corev1.EventSource{Component: "hwnet-agent", Host: host}, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now()}
	_, err := client.CoreV1().Events(podNamespace).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

func secPatch(ctx context.Context, client kubernetes.Interface, pod, body string) error {
	_, err := client.CoreV1().Pods(podNamespace).Patch(ctx, pod, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// TestSecurity_RealTokensWriteOnlyTheirOwn: the tokens hwnet-agent and
// hwnet-controller really run with, bound to their pods, may make the
// writes hwnet makes and none of the writes a stolen token would try; each
// refusal carries the admission policy's message (or the API server's own,
// for claim status and what RBAC does not grant); hwnet keeps attaching
// pods afterwards.
func TestSecurity_RealTokensWriteOnlyTheirOwn(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	node := e.c.NodeName()
	agent := kubernetes.NewForConfigOrDie(e.podToken(ctx, t, AgentNamespace, AgentSelector))
	ctrlCfg := e.podToken(ctx, t, AgentNamespace, "app=hwnet-controller")
	controller, ctrlDyn := kubernetes.NewForConfigOrDie(ctrlCfg), dynamic.NewForConfigOrDie(ctrlCfg)

	// Objects of another node and of another driver, and a pod of this one.
	other := workloadPod("sec-other-node", "", nil)
	other.Spec.NodeName = elsewhere
	own := workloadPod("sec-own", "", nil)
	gated := workloadPod("sec-gated", "", nil)
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: mnv1.SchedulingGate}, {Name: "example.com/other"}}
	e.cleanupPods(t, gated.Name, own.Name)
	if _, err := e.runPod(ctx, own, 0); err != nil {
		t.Fatal(err)
	}
	// Created last: the pod garbage collector deletes pods of missing
	// nodes after 40 s.
	for _, p := range []*corev1.Pod{gated, other} {
		e.createPod(ctx, t, p)
	}
	t.Cleanup(func() {
		// Nothing runs the pod of the missing node to confirm its end.
		e.client.CoreV1().Pods(podNamespace).Delete(context.Background(), other.Name, *metav1.NewDeleteOptions(0))
	})
	slices := e.client.ResourceV1().ResourceSlices()
	for _, s := range []*resourcev1.ResourceSlice{secSlice("sec-other-node", dra.DefaultDriverName, elsewhere), secSlice("sec-other-driver", "gpu.example.com", node)} {
		if _, err := slices.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { slices.Delete(context.Background(), s.Name, metav1.DeleteOptions{}) })
	}
	e.secClaim(ctx, t, "sec-own-node", dra.DefaultDriverName, node)
	e.secClaim(ctx, t, "sec-other-node", dra.DefaultDriverName, elsewhere)
	e.secClaim(ctx, t, "sec-other-driver", "gpu.example.com", node)
	pns := ctrlDyn.Resource(mnv1.PodNetworkResource)
	pn := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"enabled": true}}}
	pn.SetAPIVersion(mnv1.Group + "/" + mnv1.Version)
	pn.SetKind("PodNetwork")
	pn.SetName("sec-net")
	adminCfg, err := e.c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	admDyn := dynamic.NewForConfigOrDie(adminCfg)
	if _, err := admDyn.Resource(mnv1.PodNetworkResource).Create(ctx, pn, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		admDyn.Resource(mnv1.PodNetworkResource).Delete(context.Background(), "sec-net", metav1.DeleteOptions{})
	})

	const status = `{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`
	agentSlices := agent.ResourceV1().ResourceSlices()
	nodeRef := func(name string) corev1.ObjectReference {
		return corev1.ObjectReference{Kind: "Node", Name: name, UID: types.UID(name)}
	}
	patchPN := func(ctx context.Context, body string) error {
		_, err := pns.Patch(ctx, "sec-net", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	runSecWrites(ctx, t, []secWrite{
		// hwnet-agent: pods.
		{"agent: another node's pod", "only pods on its own node (" + node + "); pod sec-other-node is on " + elsewhere, func(ctx context.Context) error {
			return secPatch(ctx, agent, other.Name, status)
		}},
		{"agent: a pod's image", "may not change a pod's spec or labels", func(ctx context.Context) error {
			return secPatch(ctx, agent, own.Name, `{"spec":{"containers":[{"name":"`+container+`","image":"evil"}]}}`)
		}},
		{"agent: a pod's labels", "may not change a pod's spec or labels", func(ctx context.Context) error {
			return secPatch(ctx, agent, own.Name, `{"metadata":{"labels":{"app":"evil"}}}`)
		}},
		{"agent: a dangling ownerReference", "may not change a pod's ownerReferences or finalizers", func(ctx context.Context) error {
			return secPatch(ctx, agent, own.Name, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`)
		}},
		{"agent: a finalizer", "may not change a pod's ownerReferences or finalizers", func(ctx context.Context) error {
			return secPatch(ctx, agent, own.Name, `{"metadata":{"finalizers":["example.com/hold"]}}`)
		}},
		{"agent: pods/status", `cannot patch resource "pods/status"`, func(ctx context.Context) error {
			_, err := agent.CoreV1().Pods(podNamespace).Patch(ctx, own.Name, types.MergePatchType, []byte(`{"status":{"message":"x"}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		{"agent: its own node's pod network-status", "", func(ctx context.Context) error {
			pod, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, own.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			// The same value back: the write is allowed and changes nothing.
			body := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, statusKey, pod.Annotations[statusKey])
			return secPatch(ctx, agent, own.Name, body)
		}},
		// hwnet-agent: ResourceSlices.
		{"agent: another node's slice", "only ResourceSlices of its own node (" + node + "); slice sec-fake is of " + elsewhere, func(ctx context.Context) error {
			_, err := agentSlices.Create(ctx, secSlice("sec-fake", dra.DefaultDriverName, elsewhere), metav1.CreateOptions{})
			return err
		}},
		{"agent: another driver's slice", "only ResourceSlices of its driver hwnet.io; slice sec-gpu is of gpu.example.com", func(ctx context.Context) error {
			_, err := agentSlices.Create(ctx, secSlice("sec-gpu", "gpu.example.com", node), metav1.CreateOptions{})
			return err
		}},
		{"agent: another node's slice deleted", "slice sec-other-node is of " + elsewhere, func(ctx context.Context) error {
			return agentSlices.Delete(ctx, "sec-other-node", metav1.DeleteOptions{})
		}},
		{"agent: another driver's slice deleted", "slice sec-other-driver is of gpu.example.com", func(ctx context.Context) error {
			return agentSlices.Delete(ctx, "sec-other-driver", metav1.DeleteOptions{})
		}},
		{"agent: every slice deleted", `cannot deletecollection resource "resourceslices"`, func(ctx context.Context) error {
			return agentSlices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}},
		{"agent: its own slice", "", func(ctx context.Context) error {
			if _, err := agentSlices.Create(ctx, secSlice("sec-own", dra.DefaultDriverName, node), metav1.CreateOptions{}); err != nil {
				return err
			}
			// The driver may delete this pool it does not know first.
			if err := agentSlices.Delete(ctx, "sec-own", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			return nil
		}},
		// hwnet-agent: claim status. On 1.37 Kubernetes refuses these first
		// (its per-driver check); hwnet's own policy holds them on 1.34-1.35
		// (deploy/identity_admission_test.go proves it).
		{"agent: a claim of another node", `resource="resourceclaims/driver"`, func(ctx context.Context) error {
			return claimDeviceStatus(ctx, agent, "sec-other-node", dra.DefaultDriverName, elsewhere)
		}},
		{"agent: another driver's entry", `resource="resourceclaims/driver"`, func(ctx context.Context) error {
			return claimDeviceStatus(ctx, agent, "sec-other-driver", "gpu.example.com", node)
		}},
		{"agent: its own node's claim", "", func(ctx context.Context) error {
			return claimDeviceStatus(ctx, agent, "sec-own-node", dra.DefaultDriverName, node)
		}},
		// hwnet-agent: Events.
		{"agent: an Event about another node", "only about its own node (" + node + "), not about node " + elsewhere, func(ctx context.Context) error {
			return secEvent(ctx, agent, nodeRef(elsewhere), node)
		}},
		{"agent: an Event about its node", "", func(ctx context.Context) error { return secEvent(ctx, agent, nodeRef(node), node) }},
		// hwnet-controller: pods.
		{"controller: another gate", "may only remove the scheduling gate " + mnv1.SchedulingGate, func(ctx context.Context) error {
			return secPatch(ctx, controller, gated.Name, `{"spec":{"schedulingGates":[{"$patch":"delete","name":"example.com/other"}]}}`)
		}},
		{"controller: a pod's image", "may not change a pod's spec besides removing its scheduling gate", func(ctx context.Context) error {
			return secPatch(ctx, controller, own.Name, `{"spec":{"containers":[{"name":"`+container+`","image":"evil"}]}}`)
		}},
		{"controller: a pod's ownerReference", "may not change a pod's labels, annotations, finalizers or ownerReferences", func(ctx context.Context) error {
			return secPatch(ctx, controller, own.Name, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`)
		}},
		{"controller: its own gate", "", func(ctx context.Context) error {
			return secPatch(ctx, controller, gated.Name, fmt.Sprintf(`{"spec":{"schedulingGates":[{"$patch":"delete","name":%q}]}}`, mnv1.SchedulingGate))
		}},
		// hwnet-controller: PodNetworks.
		{"controller: a PodNetwork's spec", "may not change the spec of PodNetwork sec-net", func(ctx context.Context) error {
			return patchPN(ctx, `{"spec":{"enabled":false}}`)
		}},
		{"controller: another finalizer", "may change only the finalizer " + mnv1.InUseFinalizer, func(ctx context.Context) error {
			return patchPN(ctx, `{"metadata":{"finalizers":["example.com/hold"]}}`)
		}},
		{"controller: another PodNetwork", "may create only the default PodNetwork", func(ctx context.Context) error {
			evil := pn.DeepCopy()
			evil.SetName("sec-evil")
			_, err := pns.Create(ctx, evil, metav1.CreateOptions{})
			return err
		}},
	})

	// hwnet keeps working: the agent is still ready, and a new pod gets
	// its networks.
	if _, err := runningAgent(ctx, e.client, node); err != nil {
		t.Error(err)
	}
	again := workloadPod("sec-after", "", nil)
	e.cleanupPods(t, again.Name)
	if _, err := e.runPod(ctx, again, 0); err != nil {
		t.Errorf("a pod after the matrix: %v", err)
	}
}

// TestSecurity_NodeSocketsRefuseNonRoot (issue 31): on the node, a process
// that is not root cannot connect to the agent's CNI socket nor to its CRI
// network API socket; root can, on the same sockets.
func TestSecurity_NodeSocketsRefuseNonRoot(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	for _, socket := range []string{"/run/hwnet/cni.sock", "/run/hwnet/cri-network.sock"} {
		t.Run(socket, func(t *testing.T) {
			// curl exits 7 when it cannot connect; any other answer means
			// it reached the server (which may not speak its protocol).
			if code := curlExit(ctx, t, e, socket, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"); code != 7 {
				t.Errorf("as uid 65534: curl exit %d, want 7: the connection refused", code)
			}
			if code := curlExit(ctx, t, e, socket); code == 7 {
				t.Errorf("as root: curl exit 7, want the socket reached")
			}
		})
	}
}

// curlExit runs curl on the node against the unix socket, behind the
// prefix command, and returns its exit code.
func curlExit(ctx context.Context, t *testing.T, e *env, socket string, prefix ...string) int {
	t.Helper()
	args := append(slices.Clone(prefix), "curl", "-s", "-o", "/dev/null", "--max-time", "10", "--unix-socket", socket, "http://hwnet/")
	_, err := Exec(ctx, e.c, nil, args[0], args[1:]...)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatal(err)
	return -1
}
