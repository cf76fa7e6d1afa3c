package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/controller"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/multinetapi"
)

// cluster is a real API server with the CRDs and admission policies of
// deploy/ and clients on it.
type cluster struct {
	api  *kubeapi.Server
	kube kubernetes.Interface
	dyn  dynamic.Interface
	nads nadclient.Interface
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	api := multinetapi.Start(t)
	c := &cluster{api: api, kube: api.Client()}
	c.dyn = dynamic.NewForConfigOrDie(api.Config())
	c.nads = nadclient.NewForConfigOrDie(api.Config())
	return c
}

// replica is one running controller process.
type replica struct {
	identity string
	ctrl     *controller.Controller
	cancel   context.CancelFunc
	done     chan error
}

// start runs a controller replica on cfg until the test ends or stop is
// called; it competes for the lease with every other replica.
func (c *cluster) start(t *testing.T, cfg *rest.Config, identity string, o controller.Options) *replica {
	t.Helper()
	o.Kube = kubernetes.NewForConfigOrDie(cfg)
	o.Dynamic = dynamic.NewForConfigOrDie(cfg)
	o.NADs = nadclient.NewForConfigOrDie(cfg)
	ctrl, err := controller.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{identity: identity, ctrl: ctrl, cancel: cancel, done: make(chan error, 1)}
	election := controller.Election{Namespace: "default", Name: "hwnet-controller", Identity: identity,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
	go func() { r.done <- controller.RunElected(ctx, c.kube, election, ctrl.Run) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// wait waits for the replica to stop on its own.
func (r *replica) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		close(r.done)
		return err
	case <-time.After(time.Minute):
		t.Fatalf("controller %s still running after a minute", r.identity)
		return nil
	}
}

// stop ends the replica and returns what RunElected did.
func (r *replica) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	err, ok := <-r.done
	if !ok {
		return nil
	}
	close(r.done)
	return err
}

// waitLeading waits until the replica leads and its caches are synced.
func (r *replica) waitLeading(t *testing.T) {
	t.Helper()
	select {
	case <-r.ctrl.Synced():
	case err := <-r.done:
		t.Fatalf("controller %s stopped before leading: %v", r.identity, err)
	case <-time.After(time.Minute):
		t.Fatalf("controller %s did not lead and sync within a minute", r.identity)
	}
}

// run starts a replica and waits until it leads.
func (c *cluster) run(t *testing.T, cfg *rest.Config, identity string, o controller.Options) *replica {
	t.Helper()
	r := c.start(t, cfg, identity, o)
	r.waitLeading(t)
	return r
}

// waitFor polls cond until it holds; its message says what was last seen.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: last seen %s", what, seen)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *cluster) podNetwork(t *testing.T, name string) (*mnv1.PodNetwork, error) {
	t.Helper()
	u, err := c.dyn.Resource(mnv1.PodNetworkResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return mnv1.FromUnstructured[mnv1.PodNetwork](u)
}

// waitCondition waits until the PodNetwork's condition has status and
// reason, and returns it.
func (c *cluster) waitCondition(t *testing.T, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	waitFor(t, fmt.Sprintf("PodNetwork %s %s=%s (%s)", name, typ, status, reason), func() (bool, string) {
		pn, err := c.podNetwork(t, name)
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(pn.Status.Conditions, typ)
		if cond == nil {
			return false, fmt.Sprintf("conditions %v", pn.Status.Conditions)
		}
		got = *cond
		return cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == pn.Generation, fmt.Sprintf("%+v at generation %d", *cond, pn.Generation)
	})
	return got
}

func (c *cluster) createPodNetwork(t *testing.T, name string, enabled bool, nads ...string) {
	t.Helper()
	pn := &mnv1.PodNetwork{
		TypeMeta:   metav1.TypeMeta{APIVersion: mnv1.Group + "/" + mnv1.Version, Kind: "PodNetwork"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       mnv1.PodNetworkSpec{Enabled: &enabled, Provider: mnv1.Provider},
	}
	for _, nad := range nads { // NAME in namespace default, or NAMESPACE/NAME
		ns, name, ok := strings.Cut(nad, "/")
		if !ok {
			ns, name = "default", nad
		}
		pn.Spec.ParametersRefs = append(pn.Spec.ParametersRefs, mnv1.ParametersRef{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition", Name: name, Namespace: ns})
	}
	u, err := mnv1.ToUnstructured(pn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.dyn.Resource(mnv1.PodNetworkResource).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) createNAD(t *testing.T, name, config string) {
	t.Helper()
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
	if _, err := c.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions("default").Create(context.Background(), nad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) setEnabled(t *testing.T, name string, enabled bool) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"enabled":%v}}`, enabled)
	if _, err := c.dyn.Resource(mnv1.PodNetworkResource).Patch(context.Background(), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

const sriovConfig = `{"cniVersion":"1.0.0","type":"host-device","ipam":{"type":"static"}}`

// TestKEP3698_PodNetworkConditions: Created -> Ready once hwnet finds the
// referenced NAD valid (ParamsReady); enabled=false makes it NotReady
// (AdministrativelyDisabled); conditions carry observedGeneration and
// change lastTransitionTime only on transitions.
func TestKEP3698_PodNetworkConditions(t *testing.T) {
	c := newCluster(t)
	c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: true})

	c.createPodNetwork(t, "dataplane", true, "sriov-net")
	c.waitCondition(t, "dataplane", mnv1.ConditionParamsReady, metav1.ConditionFalse, mnv1.ReasonParamsInvalid)
	c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionFalse, mnv1.ReasonParamsNotReady)
	c.createNAD(t, "sriov-net", sriovConfig)
	ready := c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)
	c.waitCondition(t, "dataplane", mnv1.ConditionParamsReady, metav1.ConditionTrue, mnv1.ReasonParamsValid)

	c.setEnabled(t, "dataplane", false)
	disabled := c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionFalse, mnv1.ReasonAdministrativelyDisabled)
	if !disabled.LastTransitionTime.After(ready.LastTransitionTime.Time) && disabled.LastTransitionTime != ready.LastTransitionTime {
		t.Errorf("Ready went False at %v, before it went True at %v", disabled.LastTransitionTime, ready.LastTransitionTime)
	}
	params := c.waitCondition(t, "dataplane", mnv1.ConditionParamsReady, metav1.ConditionTrue, mnv1.ReasonParamsValid)
	if params.ObservedGeneration != 2 {
		t.Errorf("ParamsReady observedGeneration %d after one spec change, want 2", params.ObservedGeneration)
	}

	c.createNAD(t, "broken", `{"cniVersion":"1.0.0","plugins":"nope"}`)
	c.createPodNetwork(t, "badparams", true, "broken")
	c.waitCondition(t, "badparams", mnv1.ConditionParamsReady, metav1.ConditionFalse, mnv1.ReasonParamsInvalid)
	c.createPodNetwork(t, "two-nads", true, "sriov-net", "broken")
	c.waitCondition(t, "two-nads", mnv1.ConditionParamsReady, metav1.ConditionFalse, mnv1.ReasonParamsInvalid)
}

// TestKEP3698_DefaultPodNetwork: created at start, Ready, and recreated
// when deleted, even while pods use it (KEP "Default PodNetwork",
// "Availability"); not created with
// --disable-default-podnetwork-creation.
func TestKEP3698_DefaultPodNetwork(t *testing.T) {
	c := newCluster(t)
	a := c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: false, Workers: 1})
	c.createPodNetwork(t, "other", true)
	c.waitCondition(t, "other", mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)
	if _, err := c.podNetwork(t, mnv1.DefaultPodNetwork); err == nil {
		t.Error("the default PodNetwork exists with creation disabled")
	}
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	c.run(t, c.api.Config(), "b", controller.Options{CreateDefault: true})
	c.waitCondition(t, mnv1.DefaultPodNetwork, mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)
	first, _ := c.podNetwork(t, mnv1.DefaultPodNetwork)
	if first.Spec.Provider != "" || len(first.Spec.ParametersRefs) != 0 || !first.Spec.IsEnabled() {
		t.Errorf("default PodNetwork spec %+v, want the KEP's exact object (enabled only)", first.Spec)
	}
	// Every pod without references uses the default network, yet it is not
	// held Terminating: it is recreated instead, never to stay deleted.
	c.createPod(t, "plain", "")
	if err := c.dyn.Resource(mnv1.PodNetworkResource).Delete(context.Background(), mnv1.DefaultPodNetwork, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the default PodNetwork to be recreated", func() (bool, string) {
		pn, err := c.podNetwork(t, mnv1.DefaultPodNetwork)
		return err == nil && pn.UID != first.UID && pn.DeletionTimestamp == nil, fmt.Sprint(err)
	})
}

func (c *cluster) createPod(t *testing.T, name, networks string) *corev1.Pod {
	t.Helper()
	created, err := c.kube.CoreV1().Pods("default").Create(context.Background(), multinetapi.Pod(name, networks), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func (c *cluster) deletePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	zero := int64(0)
	if err := c.kube.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) gates(t *testing.T, name string) []string {
	t.Helper()
	pod, err := c.kube.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range pod.Spec.SchedulingGates {
		names = append(names, g.Name)
	}
	return names
}

// podEvent waits for an Event of reason on the pod whose message holds want.
func (c *cluster) podEvent(t *testing.T, pod, reason, want string) {
	t.Helper()
	waitFor(t, fmt.Sprintf("a %s Event on pod %s saying %q", reason, pod, want), func() (bool, string) {
		evs, err := c.kube.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range evs.Items {
			if e.Reason == reason && strings.Contains(e.Message, want) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, " | ")
	})
}

// TestKEP3698_ActiveValidations: a pod referencing a disabled network
// stays gated (Pending) with an Event naming it, and is released once the
// network is enabled; one through a PodNetworkAttachment waits for the
// attachment, whose Ready follows its network's.
func TestKEP3698_ActiveValidations(t *testing.T) {
	c := newCluster(t)
	c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: true})
	c.createNAD(t, "sriov-net", sriovConfig)
	c.createPodNetwork(t, "dataplane", false, "sriov-net")
	c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionFalse, mnv1.ReasonAdministrativelyDisabled)

	c.createPod(t, "cnf", `[{"name":"dataplane","interfaceName":"net1","isDefaultGW":true}]`)
	c.podEvent(t, "cnf", controller.ReasonNetworkNotReady, "PodNetwork dataplane is not Ready: AdministrativelyDisabled")
	if got := c.gates(t, "cnf"); !slices.Equal(got, []string{mnv1.SchedulingGate}) {
		t.Fatalf("gates %v, want the pod held by %s", got, mnv1.SchedulingGate)
	}
	c.createPod(t, "via-pna", `[{"attachmentName":"fast","interfaceName":"net2"}]`)
	c.podEvent(t, "via-pna", controller.ReasonNetworkNotReady, "PodNetworkAttachment default/fast does not exist")
	c.createAttachment(t, "fast", "dataplane")
	c.podEvent(t, "via-pna", controller.ReasonNetworkNotReady, mnv1.ReasonPodNetworkNotReady)

	c.setEnabled(t, "dataplane", true)
	for _, pod := range []string{"cnf", "via-pna"} {
		waitFor(t, "pod "+pod+" released", func() (bool, string) {
			gates := c.gates(t, pod)
			return len(gates) == 0, fmt.Sprint(gates)
		})
		c.podEvent(t, pod, controller.ReasonNetworksReady, "lifted")
	}
	// A pod created right after the network is disabled is held, though
	// the Ready condition the controller has not yet updated still says
	// True: it was observed at the older generation.
	c.setEnabled(t, "dataplane", false)
	c.createPod(t, "right-after", `[{"name":"dataplane"}]`)
	c.podEvent(t, "right-after", controller.ReasonNetworkNotReady, "PodNetwork dataplane")
	if got := c.gates(t, "right-after"); !slices.Equal(got, []string{mnv1.SchedulingGate}) {
		t.Errorf("pod created as its network was disabled: gates %v, want it held", got)
	}
}

// createAttachment creates PodNetworkAttachment name in namespace default,
// with its own parameters when refs are given.
func (c *cluster) createAttachment(t *testing.T, name, network string, refs ...mnv1.ParametersRef) {
	t.Helper()
	u, err := mnv1.ToUnstructured(&mnv1.PodNetworkAttachment{
		TypeMeta:   metav1.TypeMeta{APIVersion: mnv1.Group + "/" + mnv1.Version, Kind: "PodNetworkAttachment"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       mnv1.PodNetworkAttachmentSpec{PodNetworkName: network, ParametersRefs: refs},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default").Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func finalizers(t *testing.T, c *cluster, gvr bool, name string) []string {
	t.Helper()
	var u *unstructured.Unstructured
	var err error
	if gvr {
		u, err = c.dyn.Resource(mnv1.PodNetworkResource).Get(context.Background(), name, metav1.GetOptions{})
	} else {
		u, err = c.dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
	}
	if err != nil {
		return []string{"error: " + err.Error()}
	}
	return u.GetFinalizers()
}
