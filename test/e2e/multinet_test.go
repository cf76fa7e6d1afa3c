package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

const multinetFile = "test/e2e/testdata/multinet.yaml"

// multinet applies the scenario's NAD, PodNetwork and attachment, waits
// until the network is Ready and removes them when the test ends.
func (e *env) multinet(ctx context.Context, t *testing.T) dynamic.Interface {
	t.Helper()
	cfg, err := e.c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	data, err := os.ReadFile(filepath.Join(e.repo, multinetFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Kubectl(ctx, e.c, data, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		Kubectl(context.Background(), e.c, data, "delete", "--ignore-not-found", "--wait=false", "-f", "-")
	})
	waitPodNetworkReady(ctx, t, dyn, "dataplane")
	return dyn
}

func waitPodNetworkReady(ctx context.Context, t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	mustPoll(ctx, t, "PodNetwork "+name+" Ready", func(ctx context.Context) error {
		u, err := dyn.Resource(mnv1.PodNetworkResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pn, err := mnv1.FromUnstructured[mnv1.PodNetwork](u)
		if err != nil {
			return err
		}
		return mnv1.NotReady(pn.Status.Conditions)
	})
}

// mustPoll is cluster.Poll for podTimeout, failing the test if check never
// holds.
func mustPoll(ctx context.Context, t *testing.T, what string, check func(context.Context) error) {
	t.Helper()
	if err := cluster.Poll(ctx, podTimeout, what, check); err != nil {
		t.Fatal(err)
	}
}

// referencingPod is a workload pod holding one SR-IOV VF and referencing
// networks through the KEP-3698 annotation.
func referencingPod(name, networks string) *corev1.Pod {
	pod := workloadPod(name, "", map[corev1.ResourceName]int64{sriovResource: 1})
	pod.Annotations = map[string]string{mnv1.NetworksAnnotation: networks}
	return pod
}

func podNetworksStatus(t *testing.T, pod *corev1.Pod) []mnv1.NetworkStatus {
	t.Helper()
	var st []mnv1.NetworkStatus
	if err := json.Unmarshal([]byte(pod.Annotations[mnv1.NetworksStatusAnnotation]), &st); err != nil {
		t.Fatalf("%s %q: %v", mnv1.NetworksStatusAnnotation, pod.Annotations[mnv1.NetworksStatusAnnotation], err)
	}
	return st
}

// TestKEP3698_PodsAttachThroughPodNetworks: a PodNetwork on an SR-IOV NAD
// goes Ready; a pod naming it (isDefaultGW) and one through a
// PodNetworkAttachment each get a VF as net1 with an address of the
// network, the pod's PodStatus.networks, and the VF's default route.
func TestKEP3698_PodsAttachThroughPodNetworks(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	e.multinet(ctx, t)
	pods := []*corev1.Pod{
		referencingPod("kep-by-name", `[{"name":"dataplane","interfaceName":"net1","isDefaultGW":true}]`),
		referencingPod("kep-by-attachment", `[{"attachmentName":"fast","interfaceName":"net1"}]`),
	}
	e.cleanupPods(t, pods[0].Name, pods[1].Name)
	for i, pod := range pods {
		running, err := e.runPod(ctx, pod, 1)
		if err != nil {
			t.Fatal(err)
		}
		st := podNetworksStatus(t, running)
		t.Logf("%s: %s", pod.Name, running.Annotations[mnv1.NetworksStatusAnnotation])
		if len(st) != 2 || st[0].Name != "default" || st[0].IP != running.Status.PodIP ||
			st[1].Name != "dataplane" || st[1].InterfaceName != "net1" || !strings.HasPrefix(st[1].IP, "10.58.0.") ||
			st[1].IsDefaultGW != (i == 0) || st[0].IsDefaultGW == (i == 0) {
			t.Errorf("%s networks status %+v: want default with the pod IP, then dataplane on net1 with a 10.58.0.0/24 address (default gateway: %v)", pod.Name, st, i == 0)
		}
		links := podLinks(t, e.containerPID(ctx, t, running))
		if l, ok := links["net1"]; !ok || len(st) < 2 || !slices.Contains(l.Addrs, st[1].IP+"/24") {
			t.Errorf("%s net1 %+v (present %v), want the VF with the address of %+v", pod.Name, l, ok, st)
		}
	}
	e.deleteLeavingNothing(ctx, t, before, pods[0].Name, pods[1].Name)
}

// TestKEP3698_InUseNetworkWaitsForItsPods: a PodNetwork deleted while a pod
// uses it stays Terminating until the pod goes.
func TestKEP3698_InUseNetworkWaitsForItsPods(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	dyn := e.multinet(ctx, t)
	pod := referencingPod("kep-in-use", `[{"name":"dataplane"}]`)
	e.cleanupPods(t, pod.Name)
	if _, err := e.runPod(ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
	pnas := dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace(podNamespace)
	if err := pnas.Delete(ctx, "fast", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pns := dyn.Resource(mnv1.PodNetworkResource)
	if err := pns.Delete(ctx, "dataplane", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	u, err := pns.Get(ctx, "dataplane", metav1.GetOptions{})
	if err != nil || u.GetDeletionTimestamp() == nil {
		t.Fatalf("PodNetwork in use after delete: %v; want it Terminating while pod %s runs", err, pod.Name)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
	mustPoll(ctx, t, "PodNetwork dataplane gone with its last pod", func(ctx context.Context) error {
		_, err := pns.Get(ctx, "dataplane", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// TestKEP3698_DisabledNetworkKeepsPodsPending: with the network disabled a
// new pod stays Pending (scheduling gate) with an Event naming it, and
// starts once the network is enabled again.
func TestKEP3698_DisabledNetworkKeepsPodsPending(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	dyn := e.multinet(ctx, t)
	pns := dyn.Resource(mnv1.PodNetworkResource)
	setEnabled := func(on bool) {
		patch := fmt.Sprintf(`{"spec":{"enabled":%v}}`, on)
		if _, err := pns.Patch(ctx, "dataplane", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setEnabled(false)
	pod := referencingPod("kep-waits", `[{"name":"dataplane"}]`)
	e.cleanupPods(t, pod.Name)
	e.createPod(ctx, t, pod)
	mustPoll(ctx, t, "an Event saying why pod kep-waits waits", func(ctx context.Context) error {
		events, err := e.podEvents(ctx, pod.Name, "NetworkNotReady")
		if err != nil {
			return err
		}
		for _, ev := range events {
			if strings.Contains(ev.Message, "PodNetwork dataplane is not Ready: AdministrativelyDisabled") {
				return nil
			}
		}
		return fmt.Errorf("events %v", events)
	})
	// The controller's own token and policies let it say so on the pod's
	// PodScheduled condition, which the cluster's scheduler leaves alone.
	mustPoll(ctx, t, "pod kep-waits's PodScheduled condition saying why", func(ctx context.Context) error {
		got, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonSchedulingGated &&
				strings.Contains(c.Message, "PodNetwork dataplane is not Ready: AdministrativelyDisabled") {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", got.Status.Conditions)
	})
	got, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.PodPending || len(got.Spec.SchedulingGates) != 1 || got.Spec.NodeName != "" {
		t.Fatalf("pod while its network is disabled: %v, %+v; want Pending, gated, unscheduled", err, got.Status)
	}
	setEnabled(true)
	if _, err := e.waitRunning(ctx, pod.Name, 1); err != nil {
		t.Fatal(err)
	}
}

// TestKEP3698_APIServerEnforces: the default PodNetwork comes back when
// deleted; a pod with two isDefaultGW networks or a reused interface name
// is refused at create naming the field; a PodNetwork's spec other than
// enabled cannot change.
func TestKEP3698_APIServerEnforces(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	dyn := e.multinet(ctx, t)
	pns := dyn.Resource(mnv1.PodNetworkResource)
	waitPodNetworkReady(ctx, t, dyn, mnv1.DefaultPodNetwork)
	first, err := pns.Get(ctx, mnv1.DefaultPodNetwork, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := pns.Delete(ctx, mnv1.DefaultPodNetwork, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	mustPoll(ctx, t, "the default PodNetwork recreated", func(ctx context.Context) error {
		u, err := pns.Get(ctx, mnv1.DefaultPodNetwork, metav1.GetOptions{})
		if err != nil || u.GetUID() == first.GetUID() {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})
	for networks, field := range map[string]string{
		`[{"name":"dataplane","isDefaultGW":true},{"name":"default","isDefaultGW":true}]`:                "isDefaultGW",
		`[{"name":"dataplane","interfaceName":"net1"},{"attachmentName":"fast","interfaceName":"net1"}]`: "interfaceName",
	} {
		err := e.create(ctx, referencingPod("kep-invalid", networks))
		if err == nil || !strings.Contains(err.Error(), field) {
			e.deletePods(ctx, "kep-invalid")
			t.Errorf("pod with %s: %v, want refused naming %s", networks, err, field)
		}
	}
	patch := []byte(`{"spec":{"provider":"other.io/cni"}}`)
	if _, err := pns.Patch(ctx, "dataplane", types.MergePatchType, patch, metav1.PatchOptions{}); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing a PodNetwork's provider: %v, want refused as immutable", err)
	}
}
