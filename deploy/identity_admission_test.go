package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	resourceac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// The manifests that grant and narrow what hwnet's identities may write,
// as deploy/kustomization.yaml installs them.
var identityManifests = []string{
	"hwnet-agent.yaml", "hwnet-agent-admission.yaml", "dra/rbac.yaml", "dra/admission.yaml",
	"hwnet-controller.yaml", "hwnet-controller-admission.yaml",
}

// saClient is a client with a token of service account sa in kube-system
// bound to a pod of that account on node, as kubelet gives the pod: the
// token names the node (authentication.kubernetes.io/node-name).
func saClient(t *testing.T, api *kubeapi.Server, sa, node string) *rest.Config {
	t.Helper()
	return saClientIn(t, api, "kube-system", sa, node)
}

// saClientIn is saClient for the service account sa in namespace ns.
func saClientIn(t *testing.T, api *kubeapi.Server, ns, sa, node string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	admin := api.Client()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: sa + "-" + node, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "c", Image: "hwnet:dev"}}},
	}
	pod, err := admin.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeapi.PodToken(ctx, admin, api.Config(), pod)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// write is one write of the matrix: allowed when refused is empty, else
// refused with an error that contains refused (kubeapi.CheckWrite).
type write struct {
	name    string
	refused string
	do      func(ctx context.Context) error
}

func runWrites(t *testing.T, writes []write) {
	t.Helper()
	for _, w := range writes {
		kubeapi.CheckWrite(t, w.name, w.refused, w.do(context.Background()))
	}
}

// identityAPI is a real API server with one install's identities, their
// RBAC and admission policies in force, two nodes' pods, and clients with
// the agent's token on node-a and the controller's.
type identityAPI struct {
	api        *kubeapi.Server
	admin      kubernetes.Interface
	agent      kubernetes.Interface
	controller kubernetes.Interface
	ctrlDyn    dynamic.Interface
	adminDyn   dynamic.Interface
}

// install is one way an admin installs hwnet's identities: the namespace
// of its service accounts and how their RBAC and policies get there.
type install struct {
	name      string
	namespace string
	apply     func(t *testing.T, api *kubeapi.Server)
}

// baseInstall is deploy/'s manifests as the kustomize base has them, in
// kube-system.
var baseInstall = install{name: "kustomize base", namespace: "kube-system", apply: func(t *testing.T, api *kubeapi.Server) {
	for _, f := range identityManifests {
		api.ApplyFile(t, f)
	}
}}

// startIdentityAPI starts a kube-apiserver with apiserverArgs, installs
// inst and waits until every policy is in force.
func startIdentityAPI(t *testing.T, inst install, apiserverArgs ...string) *identityAPI {
	t.Helper()
	api := kubeapi.Start(t, apiserverArgs...)
	admin := api.Client()
	ensureNamespace(t, admin, inst.namespace)
	api.ApplyCRD(t, "crds/multinetwork.hwnet.io_podnetworks.yaml")
	api.ApplyCRD(t, "crds/multinetwork.hwnet.io_podnetworkattachments.yaml")
	inst.apply(t, api)
	ctrlCfg := saClientIn(t, api, inst.namespace, "hwnet-controller", "node-b")
	env := &identityAPI{api: api, admin: admin,
		agent:      kubernetes.NewForConfigOrDie(saClientIn(t, api, inst.namespace, "hwnet-agent", "node-a")),
		controller: kubernetes.NewForConfigOrDie(ctrlCfg),
		ctrlDyn:    dynamic.NewForConfigOrDie(ctrlCfg),
		adminDyn:   dynamic.NewForConfigOrDie(api.Config()),
	}
	env.waitPolicies(t)
	return env
}

// waitPolicies waits until the API server's informers have every
// policy: a refusal of each identity's forbidden write shows they are in
// force. (Type checking, which would warn of a mistyped expression, is
// kube-controller-manager's; the writes below exercise every expression.)
func (e *identityAPI) waitPolicies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-b", Containers: []corev1.Container{{Name: "c", Image: "cnf"}}}}
	if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A claim on node-a with a device of node-b's pool: Kubernetes lets
	// the agent write its entry, only hwnet's policy refuses.
	e.claim(t, "probe", "node-a", "node-b")
	// Each probe changes something, so a write that landed before its
	// policy was in force is no no-op the next time.
	n := 0
	relabel := func(client kubernetes.Interface) error {
		n++
		return patchPod(ctx, client, "probe", fmt.Sprintf(`{"metadata":{"labels":{"probe":"%d"}}}`, n))
	}
	probes := map[string]func() error{
		"agent pods": func() error { return relabel(e.agent) },
		"agent events": func() error {
			return createEvent(ctx, e.agent, "default", corev1.ObjectReference{Kind: "Node", Name: "node-b"}, "hwnet-agent", "")
		},
		"agent slices": func() error {
			n++
			return createSlice(ctx, e.agent, fmt.Sprintf("probe-%d", n), "hwnet.io", "node-b")
		},
		"agent claim status": func() error {
			n++
			return applyDeviceStatus(ctx, e.agent, "probe", "hwnet.io", "node-b", "vf-0", fmt.Sprintf("net%d", n))
		},
		"controller pods": func() error { return relabel(e.controller) },
		"controller podnetworks": func() error {
			n++
			return createPodNetwork(ctx, e.ctrlDyn, fmt.Sprintf("probe-%d", n))
		},
	}
	for what, probe := range probes {
		kubeapi.WaitFor(t, "the policy on "+what+" in force", func() bool {
			err := probe()
			return err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
		})
	}
}

func patchPod(ctx context.Context, client kubernetes.Interface, name, body string) error {
	_, err := client.CoreV1().Pods("default").Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{})
	return err
}

// podStatusRefused is the refusal of a pod status write the controller
// does not make.
const podStatusRefused = "hwnet-controller may only set the PodScheduled condition of a pod its gate"

func patchPodStatus(ctx context.Context, client kubernetes.Interface, name, body string) error {
	_, err := client.CoreV1().Pods("default").Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
	return err
}

// scheduledPatch sets the PodScheduled condition, as the controller does.
func scheduledPatch(status, message string) string {
	return fmt.Sprintf(`{"status":{"conditions":[{"type":"PodScheduled","status":%q,"reason":"SchedulingGated","message":%q}]}}`, status, message)
}

func createEvent(ctx context.Context, client kubernetes.Interface, ns string, about corev1.ObjectReference, component, host string) error {
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "hwnet-", Namespace: ns},
		InvolvedObject: about, Reason: "DeviceUnhealthy", Message: "test", Type: corev1.EventTypeWarning,
		Source: corev1.EventSource{Component: component, Host: host}, Count: 1,
		FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(),
	}
	_, err := client.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{})
	return err
}

func slice(name, driver, node string) *resourcev1.ResourceSlice {
	s := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceSliceSpec{Driver: driver, Pool: resourcev1.ResourcePool{Name: "pool", ResourceSliceCount: 1}}}
	if node == "" {
		s.Spec.AllNodes = new(true)
	} else {
		s.Spec.NodeName = new(node)
	}
	return s
}

func createSlice(ctx context.Context, client kubernetes.Interface, name, driver, node string) error {
	_, err := client.ResourceV1().ResourceSlices().Create(ctx, slice(name, driver, node), metav1.CreateOptions{})
	return err
}

// updateSlice reads the slice and writes it back with a label more.
func updateSlice(ctx context.Context, client kubernetes.Interface, admin kubernetes.Interface, name string) error {
	s, err := admin.ResourceV1().ResourceSlices().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.Labels = map[string]string{"touched": "yes"}
	_, err = client.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{})
	return err
}

func createPodNetwork(ctx context.Context, client dynamic.Interface, name string) error {
	pn := podNetwork(name, map[string]any{"enabled": true})
	_, err := client.Resource(mnv1.PodNetworkResource).Create(ctx, pn, metav1.CreateOptions{})
	return err
}

// TestAgentWritesOnlyItsOwnNodesObjects: with the real token of an agent
// on node-a, RBAC and the policies leave it the writes its code makes and
// refuse each write a stolen token would try.
func TestAgentWritesOnlyItsOwnNodesObjects(t *testing.T) {
	startIdentityAPI(t, baseInstall).agentWrites(t)
}

// agentWrites is the agent's matrix of pod, slice and Event writes.
func (e *identityAPI) agentWrites(t *testing.T) {
	ctx := context.Background()
	for name, node := range map[string]string{"pod-a": "node-a", "pod-b": "node-b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "cnf"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "cnf"}}}}
		if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []*resourcev1.ResourceSlice{slice("b-hwnet", "hwnet.io", "node-b"), slice("a-gpu", "gpu.example.com", "node-a")} {
		if _, err := e.admin.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const status = `{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`
	owner := `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"00000000-0000-0000-0000-000000000001"}]}}`
	slices := e.agent.ResourceV1().ResourceSlices()
	podRef := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "pod-b"}
	runWrites(t, []write{
		// Pods: the network-status annotations of its own node's pods.
		{"own node's pod status annotation", "", func(ctx context.Context) error { return patchPod(ctx, e.agent, "pod-a", status) }},
		{"other node's pod", "only pods on its own node (node-a); pod pod-b is on node-b", func(ctx context.Context) error {
			return patchPod(ctx, e.agent, "pod-b", status)
		}},
		{"a pod's image", "may not change a pod's spec", func(ctx context.Context) error {
			return patchPod(ctx, e.agent, "pod-a", `{"spec":{"containers":[{"name":"c","image":"evil"}]}}`)
		}},
		{"a pod's ownerReference", "may not change a pod's ownerReferences or finalizers", func(ctx context.Context) error {
			return patchPod(ctx, e.agent, "pod-a", owner)
		}},
		{"a pod's finalizer", "may not change a pod's ownerReferences or finalizers", func(ctx context.Context) error {
			return patchPod(ctx, e.agent, "pod-a", `{"metadata":{"finalizers":["example.com/hold"]}}`)
		}},
		{"a pod's status", "cannot patch resource \"pods/status\"", func(ctx context.Context) error {
			_, err := e.agent.CoreV1().Pods("default").Patch(ctx, "pod-a", types.MergePatchType,
				[]byte(`{"status":{"podIP":"10.0.0.9"}}`), metav1.PatchOptions{}, "status")
			return err
		}},
		// ResourceSlices: its own driver's, on its own node.
		{"own node's slice", "", func(ctx context.Context) error { return createSlice(ctx, e.agent, "a-hwnet", "hwnet.io", "node-a") }},
		{"own node's slice, updated", "", func(ctx context.Context) error { return updateSlice(ctx, e.agent, e.admin, "a-hwnet") }},
		{"other node's slice", "only ResourceSlices of its own node (node-a); slice a-fake is of node-b", func(ctx context.Context) error {
			return createSlice(ctx, e.agent, "a-fake", "hwnet.io", "node-b")
		}},
		{"other driver's slice", "only ResourceSlices of its driver hwnet.io; slice a-gpu2 is of gpu.example.com", func(ctx context.Context) error {
			return createSlice(ctx, e.agent, "a-gpu2", "gpu.example.com", "node-a")
		}},
		{"slice of all nodes", "slice a-all is of no single node", func(ctx context.Context) error {
			return createSlice(ctx, e.agent, "a-all", "hwnet.io", "")
		}},
		{"other node's slice, updated", "slice b-hwnet is of node-b", func(ctx context.Context) error {
			return updateSlice(ctx, e.agent, e.admin, "b-hwnet")
		}},
		{"other node's slice, deleted", "slice b-hwnet is of node-b", func(ctx context.Context) error {
			return slices.Delete(ctx, "b-hwnet", metav1.DeleteOptions{})
		}},
		{"other driver's slice, deleted", "slice a-gpu is of gpu.example.com", func(ctx context.Context) error {
			return slices.Delete(ctx, "a-gpu", metav1.DeleteOptions{})
		}},
		{"every slice, deleted at once", "cannot deletecollection resource \"resourceslices\"", func(ctx context.Context) error {
			return slices.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		}},
		{"own node's slice, deleted", "", func(ctx context.Context) error { return slices.Delete(ctx, "a-hwnet", metav1.DeleteOptions{}) }},
		// Events: about its node or pods, as hwnet.
		{"event about its node", "", func(ctx context.Context) error {
			return createEvent(ctx, e.agent, "default", corev1.ObjectReference{Kind: "Node", Name: "node-a", UID: "node-a"}, "hwnet-agent", "node-a")
		}},
		{"event about a pod", "", func(ctx context.Context) error { return createEvent(ctx, e.agent, "default", podRef, "hwnet", "") }},
		{"event about another node", "only about its own node (node-a), not about node node-b", func(ctx context.Context) error {
			return createEvent(ctx, e.agent, "default", corev1.ObjectReference{Kind: "Node", Name: "node-b"}, "hwnet-agent", "node-a")
		}},
		{"event about a secret", "only about its node or pods, not about a Secret", func(ctx context.Context) error {
			return createEvent(ctx, e.agent, "default", corev1.ObjectReference{Kind: "Secret", Namespace: "default", Name: "s"}, "hwnet-agent", "")
		}},
		{"event as kubelet", "only as hwnet-agent or hwnet", func(ctx context.Context) error {
			return createEvent(ctx, e.agent, "default", podRef, "kubelet", "")
		}},
		{"event from another node", "only from its own node", func(ctx context.Context) error {
			return createEvent(ctx, e.agent, "default", podRef, "hwnet", "node-b")
		}},
	})
}

// claim makes a claim allocated on node with one device of hwnet.io, from
// pool vfPool, and one of gpu.example.com, from node's pool, as the
// scheduler would (hwnet's pool is named after its node: vfPool other
// than node stands for a device the agent does not have).
func (e *identityAPI) claim(t *testing.T, name, node, vfPool string) {
	t.Helper()
	ctx := context.Background()
	claims := e.admin.ResourceV1().ResourceClaims("default")
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "vf", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "hwnet"}},
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu"}},
		}}}}
	c, err := claims.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "vf", Driver: "hwnet.io", Pool: vfPool, Device: "vf-0"},
			{Request: "gpu", Driver: "gpu.example.com", Pool: node, Device: "gpu-0"},
		}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	if _, err := claims.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gpuStatus gives the claim's gpu.example.com device a status entry of its
// driver, for the agent to leave alone.
func (e *identityAPI) gpuStatus(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	claims := e.admin.ResourceV1().ResourceClaims("default")
	c, err := claims.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gpu := c.Status.Allocation.Devices.Results[1]
	c.Status.Devices = append(c.Status.Devices, resourcev1.AllocatedDeviceStatus{Driver: gpu.Driver, Pool: gpu.Pool, Device: gpu.Device})
	if _, err := claims.UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// applyDeviceStatus writes a status.devices entry for the device with the
// agent's own writer (cni/report: server-side apply of the status
// subresource, networkData, the Ready condition and the VF settings in
// data), so the policy is tried on what the agent really writes.
func applyDeviceStatus(ctx context.Context, client kubernetes.Interface, claim, driver, pool, device, ifName string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	vlan := 100
	return report.NewClaimStatusWriter(client, "hwnet.io").SetClaimDeviceStatus(ctx,
		netclaim.ClaimRef{Namespace: "default", Name: claim}, []netclaim.DeviceStatus{{
			Driver: driver, Pool: pool, Device: device, InterfaceName: ifName, IPs: []string{"10.0.0.5/24"},
			HardwareAddress: "02:00:00:00:00:01", Network: "dataplane", VF: &vfsettings.Settings{VLAN: &vlan},
		}})
}

func patchClaimStatus(ctx context.Context, client kubernetes.Interface, claim, body string) error {
	_, err := client.ResourceV1().ResourceClaims("default").Patch(ctx, claim, types.MergePatchType, []byte(body), metav1.PatchOptions{}, "status")
	return err
}

// The refusals of claim status writes: hwnet's policy
// hwnet-agent-own-node-claim-status, and Kubernetes' own where 1.36+
// narrows the write first (DRAResourceClaimGranularStatusAuthorization).
const (
	claimOtherDriver = "hwnet-agent may write only status.devices entries of its driver hwnet.io; claim default/"
	claimOtherPool   = "hwnet-agent may write only status.devices entries of the pool of its own node (node-a); claim default/"
	claimAllocation  = "hwnet-agent may not change the allocation or reservedFor of claim default/"
	granularDriver   = `resource="resourceclaims/driver"`
	granularBinding  = `resource="resourceclaims/binding"`
)

// granularOff is kube-apiserver as 1.34 and 1.35 are: no authorization of
// its own on claim status beyond RBAC's resourceclaims/status.
const granularOff = "--feature-gates=DRAResourceClaimGranularStatusAuthorization=false"

// TestAgentClaimStatusOnlyItsNodeAndDriver: the agent writes its driver's
// entries of its own node's devices in a claim's status and nothing else,
// on every Kubernetes version hwnet supports: with 1.37's own narrowing
// and without it (as 1.34 and 1.35), where hwnet's policy alone refuses.
func TestAgentClaimStatusOnlyItsNodeAndDriver(t *testing.T) {
	for _, tc := range []struct {
		name     string
		granular bool
		args     []string
	}{
		{"1.37 defaults", true, nil},
		{"without granular status authorization, as 1.34", false, []string{granularOff}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			startIdentityAPI(t, baseInstall, tc.args...).claimWrites(t, tc.granular)
		})
	}
}

// claimWrite is a claim status write: refused as write.refused says
// (hwnet's policy, or RBAC), unless granular authorization is on and
// refuses it first with granular.
type claimWrite struct {
	write
	granular string
}

// claimWrites is the agent's matrix of claim status writes; granular says
// whether the API server narrows claim status itself.
func (e *identityAPI) claimWrites(t *testing.T, granular bool) {
	e.claim(t, "on-a", "node-a", "node-a")
	e.gpuStatus(t, "on-a")
	e.claim(t, "on-b", "node-b", "node-b")
	e.claim(t, "free-a", "node-a", "node-a")
	// Allocated to node-a, with a device of node-b's pool: 1.37 lets an
	// agent on node-a write any entry of its driver in it.
	e.claim(t, "far-a", "node-a", "node-b")
	claims := e.agent.ResourceV1().ResourceClaims("default")
	for _, w := range []claimWrite{
		{write{"own node's device, own driver", "", func(ctx context.Context) error {
			return applyDeviceStatus(ctx, e.agent, "on-a", "hwnet.io", "node-a", "vf-0", "net1")
		}}, ""},
		{write{"own node's device, written again", "", func(ctx context.Context) error {
			return applyDeviceStatus(ctx, e.agent, "on-a", "hwnet.io", "node-a", "vf-0", "net2")
		}}, ""},
		{write{"other driver's entry", claimOtherDriver + "on-a: gpu.example.com/node-a/gpu-0", func(ctx context.Context) error {
			return applyDeviceStatus(ctx, e.agent, "on-a", "gpu.example.com", "node-a", "gpu-0", "net1")
		}}, granularDriver},
		{write{"other driver's entry removed", claimOtherDriver + "on-a: gpu.example.com/node-a/gpu-0", func(ctx context.Context) error {
			return patchClaimStatus(ctx, e.agent, "on-a", `{"status":{"devices":null}}`)
		}}, granularDriver},
		{write{"other node's claim", claimOtherPool + "on-b: hwnet.io/node-b/vf-0", func(ctx context.Context) error {
			return applyDeviceStatus(ctx, e.agent, "on-b", "hwnet.io", "node-b", "vf-0", "net1")
		}}, granularDriver},
		{write{"own node's claim, other node's device", claimOtherPool + "far-a: hwnet.io/node-b/vf-0", func(ctx context.Context) error {
			return applyDeviceStatus(ctx, e.agent, "far-a", "hwnet.io", "node-b", "vf-0", "net1")
		}}, ""},
		{write{"reservedFor", claimAllocation + "on-a", func(ctx context.Context) error {
			ac := resourceac.ResourceClaim("on-a", "default").WithStatus(resourceac.ResourceClaimStatus().WithReservedFor(
				resourceac.ResourceClaimConsumerReference().WithResource("pods").WithName("evil").WithUID("00000000-0000-0000-0000-000000000002")))
			_, err := claims.ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: "evil", Force: true})
			return err
		}}, granularBinding},
		{write{"deallocated", claimAllocation + "free-a", func(ctx context.Context) error {
			return patchClaimStatus(ctx, e.agent, "free-a", `{"status":{"allocation":null}}`)
		}}, granularBinding},
		{write{"spec", `cannot patch resource "resourceclaims"`, func(ctx context.Context) error {
			_, err := claims.Patch(ctx, "on-a", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			return err
		}}, ""},
	} {
		refused := w.refused
		if granular && w.granular != "" {
			refused = w.granular
		}
		kubeapi.CheckWrite(t, w.name, refused, w.do(context.Background()))
	}
}

// TestControllerWritesOnlyItsGateAndStatus: with the controller's real
// token it lifts its own scheduling gate, keeps PodNetwork status and the
// in-use finalizer, creates the default PodNetwork, and nothing more.
func TestControllerWritesOnlyItsGateAndStatus(t *testing.T) {
	startIdentityAPI(t, baseInstall).controllerWrites(t)
}

// controllerWrites is the controller's matrix of pod and PodNetwork
// writes.
func (e *identityAPI) controllerWrites(t *testing.T) {
	ctx := context.Background()
	gated := func(name string, gates ...string) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "cnf"}}}}
		for _, g := range gates {
			pod.Spec.SchedulingGates = append(pod.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: g})
		}
		if _, err := e.admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gated("lift", mnv1.SchedulingGate, "example.com/other")
	gated("other-gate", mnv1.SchedulingGate, "example.com/other")
	gated("plain")
	if err := createPodNetwork(ctx, e.adminDyn, "dataplane"); err != nil {
		t.Fatal(err)
	}
	liftGate := fmt.Sprintf(`{"spec":{"schedulingGates":[{"$patch":"delete","name":%q}]}}`, mnv1.SchedulingGate)
	pns := e.ctrlDyn.Resource(mnv1.PodNetworkResource)
	patchPN := func(ctx context.Context, body string) error {
		_, err := pns.Patch(ctx, "dataplane", types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	runWrites(t, []write{
		{"lift its gate", "", func(ctx context.Context) error { return patchPod(ctx, e.controller, "lift", liftGate) }},
		{"lift another gate", "may only remove the scheduling gate " + mnv1.SchedulingGate, func(ctx context.Context) error {
			return patchPod(ctx, e.controller, "other-gate", `{"spec":{"schedulingGates":[{"$patch":"delete","name":"example.com/other"}]}}`)
		}},
		{"a pod's image", "may not change a pod's spec besides removing its scheduling gate", func(ctx context.Context) error {
			return patchPod(ctx, e.controller, "plain", `{"spec":{"containers":[{"name":"c","image":"evil"}]}}`)
		}},
		{"a pod's toleration", "may not change a pod's spec", func(ctx context.Context) error {
			// Added, as only adding is valid (the API server's defaults
			// are there already).
			_, err := e.controller.CoreV1().Pods("default").Patch(ctx, "plain", types.JSONPatchType,
				[]byte(`[{"op":"add","path":"/spec/tolerations/-","value":{"operator":"Exists"}}]`), metav1.PatchOptions{})
			return err
		}},
		{"a pod's labels", "may not change a pod's labels, annotations, finalizers or ownerReferences", func(ctx context.Context) error {
			return patchPod(ctx, e.controller, "plain", `{"metadata":{"labels":{"app":"evil"}}}`)
		}},
		{"a pod's finalizer", "may not change a pod's labels, annotations, finalizers or ownerReferences", func(ctx context.Context) error {
			return patchPod(ctx, e.controller, "plain", `{"metadata":{"finalizers":["example.com/hold"]}}`)
		}},
		{"why a gated pod waits", "", func(ctx context.Context) error {
			return patchPodStatus(ctx, e.controller, "other-gate", scheduledPatch("False", "waiting for networks: PodNetwork dataplane is not Ready"))
		}},
		{"a gated pod scheduled", podStatusRefused, func(ctx context.Context) error {
			return patchPodStatus(ctx, e.controller, "other-gate", scheduledPatch("True", ""))
		}},
		{"an ungated pod's PodScheduled", podStatusRefused, func(ctx context.Context) error {
			return patchPodStatus(ctx, e.controller, "plain", scheduledPatch("False", "evil"))
		}},
		{"a pod's Ready condition", podStatusRefused, func(ctx context.Context) error {
			return patchPodStatus(ctx, e.controller, "other-gate", `{"status":{"conditions":[{"type":"Ready","status":"True"}]}}`)
		}},
		{"a pod's phase", podStatusRefused, func(ctx context.Context) error {
			return patchPodStatus(ctx, e.controller, "other-gate", `{"status":{"phase":"Failed"}}`)
		}},
		{"a pod's IP", podStatusRefused, func(ctx context.Context) error {
			return patchPodStatus(ctx, e.controller, "other-gate", `{"status":{"podIP":"10.0.0.1","podIPs":[{"ip":"10.0.0.1"}]}}`)
		}},
		{"the default PodNetwork", "", func(ctx context.Context) error { return createPodNetwork(ctx, e.ctrlDyn, mnv1.DefaultPodNetwork) }},
		{"another PodNetwork", "may create only the default PodNetwork", func(ctx context.Context) error {
			return createPodNetwork(ctx, e.ctrlDyn, "evil")
		}},
		{"a PodNetworkAttachment", `cannot create resource "podnetworkattachments"`, func(ctx context.Context) error {
			pna := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"podNetworkName": "dataplane"}}}
			pna.SetAPIVersion(mnv1.Group + "/" + mnv1.Version)
			pna.SetKind("PodNetworkAttachment")
			pna.SetName("evil")
			_, err := e.ctrlDyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default").Create(ctx, pna, metav1.CreateOptions{})
			return err
		}},
		{"the in-use finalizer", "", func(ctx context.Context) error {
			return patchPN(ctx, fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, mnv1.InUseFinalizer))
		}},
		{"a PodNetwork's spec", "may not change the spec of PodNetwork dataplane", func(ctx context.Context) error {
			return patchPN(ctx, `{"spec":{"enabled":false}}`)
		}},
		{"another finalizer", "may change only the finalizer " + mnv1.InUseFinalizer, func(ctx context.Context) error {
			return patchPN(ctx, fmt.Sprintf(`{"metadata":{"finalizers":[%q,"example.com/hold"]}}`, mnv1.InUseFinalizer))
		}},
		{"a PodNetwork's labels", "not its labels", func(ctx context.Context) error {
			return patchPN(ctx, `{"metadata":{"labels":{"x":"y"}}}`)
		}},
		{"a PodNetwork's status", "", func(ctx context.Context) error {
			pn, err := pns.Get(ctx, "dataplane", metav1.GetOptions{})
			if err != nil {
				return err
			}
			cond := map[string]any{"type": mnv1.ConditionReady, "status": "True", "reason": "Test", "message": "",
				"lastTransitionTime": metav1.Now().UTC().Format("2006-01-02T15:04:05Z"), "observedGeneration": pn.GetGeneration()}
			if err := unstructured.SetNestedSlice(pn.Object, []any{cond}, "status", "conditions"); err != nil {
				return err
			}
			_, err = pns.UpdateStatus(ctx, pn, metav1.UpdateOptions{})
			return err
		}},
		{"a PodNetwork deleted", `cannot delete resource "podnetworks"`, func(ctx context.Context) error {
			return pns.Delete(ctx, "dataplane", metav1.DeleteOptions{})
		}},
	})
	pod, err := e.admin.CoreV1().Pods("default").Get(ctx, "lift", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := pod.Spec.SchedulingGates; len(g) != 1 || g[0].Name != "example.com/other" {
		t.Errorf("pod lift has gates %v after the controller lifted its own, want only example.com/other", g)
	}
}
