package controller_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/controller"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

func (c *cluster) waitFinalizer(t *testing.T, podNetwork bool, name string, want bool) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%s finalizer on %s = %v", mnv1.InUseFinalizer, name, want), func() (bool, string) {
		f := finalizers(t, c, podNetwork, name)
		return slices.Contains(f, mnv1.InUseFinalizer) == want, fmt.Sprint(f)
	})
}

func (c *cluster) waitGone(t *testing.T, podNetwork bool, name string) {
	t.Helper()
	waitFor(t, name+" deleted", func() (bool, string) {
		var err error
		if podNetwork {
			_, err = c.dyn.Resource(mnv1.PodNetworkResource).Get(context.Background(), name, metav1.GetOptions{})
		} else {
			_, err = c.dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
		}
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// TestKEP3698_InUseState: a PodNetwork referenced by a pod or an attachment,
// and an attachment referenced by a pod, cannot be deleted: they stay
// Terminating until the last pod ends or goes (KEP "InUse state").
func TestKEP3698_InUseState(t *testing.T) {
	c := newCluster(t)
	c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: true})
	c.createNAD(t, "sriov-net", sriovConfig)
	c.createPodNetwork(t, "dataplane", true, "sriov-net")
	c.createAttachment(t, "fast", "dataplane")
	c.waitFinalizer(t, true, "dataplane", true)
	c.waitFinalizer(t, false, "fast", false)

	pod := c.createPod(t, "via-pna", `[{"attachmentName":"fast"}]`)
	c.waitFinalizer(t, false, "fast", true)
	if err := c.dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default").Delete(context.Background(), "fast", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if f := finalizers(t, c, false, "fast"); !slices.Contains(f, mnv1.InUseFinalizer) {
		t.Fatalf("attachment in use: finalizers %v after delete, want it Terminating", f)
	}
	// A pod that ended no longer uses what it referenced. The controller
	// may write the pod's status meanwhile, as kubelet would: a conflict
	// is read again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := c.kube.CoreV1().Pods("default").Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got.Status.Phase = corev1.PodSucceeded
		_, err = c.kube.CoreV1().Pods("default").UpdateStatus(context.Background(), got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c.waitGone(t, false, "fast")
	c.waitFinalizer(t, true, "dataplane", false)

	cnf := c.createPod(t, "cnf", `[{"name":"dataplane"}]`)
	c.waitFinalizer(t, true, "dataplane", true)
	if err := c.dyn.Resource(mnv1.PodNetworkResource).Delete(context.Background(), "dataplane", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	pn, err := c.podNetwork(t, "dataplane")
	if err != nil || pn.DeletionTimestamp == nil {
		t.Fatalf("PodNetwork in use after delete: %v, %v; want it Terminating", pn, err)
	}
	c.deletePod(t, cnf)
	c.waitGone(t, true, "dataplane")
}

// TestKEP3698_ControllerTakeover: a replica that loses its lease stops; the
// next leader finds every condition and finalizer as it should be and
// writes nothing to the objects (no flapping, nothing lost).
func TestKEP3698_ControllerTakeover(t *testing.T) {
	c := newCluster(t)
	a := c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: true})
	c.createNAD(t, "sriov-net", sriovConfig)
	c.createPodNetwork(t, "dataplane", true, "sriov-net")
	c.createAttachment(t, "fast", "dataplane")
	c.createPod(t, "cnf", `[{"name":"dataplane"}]`)
	c.createPod(t, "via-pna", `[{"attachmentName":"fast"}]`)
	before := c.waitCondition(t, "dataplane", mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)
	c.waitFinalizer(t, true, "dataplane", true)
	c.waitFinalizer(t, false, "fast", true)
	waitFor(t, "both pods released", func() (bool, string) {
		return len(c.gates(t, "cnf"))+len(c.gates(t, "via-pna")) == 0, "gated"
	})

	counted, counter := kubeapi.CountRequests(c.api.Config())
	b := c.start(t, counted, "b", controller.Options{CreateDefault: true, Workers: 1})
	c.stealLease(t, "intruder")
	if err := a.wait(t); !errors.Is(err, controller.ErrLostLease) {
		t.Fatalf("replica a after its lease was taken: %v, want ErrLostLease", err)
	}
	b.waitLeading(t)
	// With one worker the queue is first in, first out: once a network
	// created now is Ready, b has reconciled everything it found at start.
	c.createPodNetwork(t, "sentinel", true)
	c.waitCondition(t, "sentinel", mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)

	writes := map[string]int{}
	for k, n := range counter.Snapshot() {
		if verb, _, _ := strings.Cut(k, " "); verb == "PUT" || verb == "PATCH" || verb == "POST" || verb == "DELETE" {
			writes[k] = n
		}
	}
	delete(writes, "PUT leases")
	delete(writes, "POST leases")
	if want := map[string]int{"PUT podnetworks/status": 1}; fmt.Sprint(writes) != fmt.Sprint(want) {
		t.Errorf("the new leader wrote %v, want only the sentinel's status %v", writes, want)
	}
	pn, _ := c.podNetwork(t, "dataplane")
	if after := meta.FindStatusCondition(pn.Status.Conditions, mnv1.ConditionReady); after == nil || !after.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Errorf("Ready after takeover %+v, before %+v: want it untouched", after, before)
	}
	c.waitFinalizer(t, true, "dataplane", true)
	c.waitFinalizer(t, false, "fast", true)
}

// stealLease makes holder the lease's holder, renewed now, as another
// process taking over would: the current leader's next renewal fails.
func (c *cluster) stealLease(t *testing.T, holder string) {
	t.Helper()
	leases := c.kube.CoordinationV1().Leases("default")
	// The leader may renew between the read and the write: read again.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(context.Background(), "hwnet-controller", metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.NowMicro()
		lease.Spec.HolderIdentity = &holder
		lease.Spec.RenewTime = &now
		lease.Spec.AcquireTime = &now
		_, err = leases.Update(context.Background(), lease, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
