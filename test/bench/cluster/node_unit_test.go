package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// setReady creates the node if need be and sets its Ready condition.
func setReady(ctx context.Context, t *testing.T, client kubernetes.Interface, status corev1.ConditionStatus, reason, msg string) {
	t.Helper()
	nodes := client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, "vnode", metav1.GetOptions{})
	if err != nil {
		node, err = nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vnode"}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: reason,
		Message: msg, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func wantNotReadyError(t *testing.T, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, errNodeNotReady) {
		t.Fatalf("err = %v, want errNodeNotReady", err)
	}
	for _, w := range append([]string{"vnode"}, want...) {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}

// A node that goes NotReady mid-batch must end the wait with the node's
// name and condition, not leave the bench waiting.
func TestNodeNotReadyNamesNodeAndCondition(t *testing.T) {
	client := kubeapi.Start(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setReady(ctx, t, client, corev1.ConditionTrue, "KubeletReady", "")
	done := make(chan error, 1)
	go func() { done <- nodeNotReady(ctx, client, "vnode") }()
	setReady(ctx, t, client, corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.")
	wantNotReadyError(t, <-done, "Ready=Unknown", "NodeStatusUnknown", "Kubelet stopped posting")
}

// kubelet reports NotReady for a while after the CNI agent restarted: a
// batch waits for the node to be Ready again rather than give up on it.
func TestWaitNodeReadyWaitsOutNotReady(t *testing.T) {
	client := kubeapi.Start(t).Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setReady(ctx, t, client, corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready")
	done := make(chan error, 1)
	go func() { done <- waitNodeReady(ctx, client, "vnode", time.Minute) }()
	setReady(ctx, t, client, corev1.ConditionTrue, "KubeletReady", "")
	if err := <-done; err != nil {
		t.Fatalf("waitNodeReady on a node that turned Ready = %v", err)
	}
}

// A node that stays NotReady: the error says which node and why.
func TestWaitNodeReadyNamesCondition(t *testing.T) {
	client := kubeapi.Start(t).Client()
	ctx := context.Background()
	setReady(ctx, t, client, corev1.ConditionFalse, "KubeletNotReady", "container runtime network not ready")
	err := waitNodeReady(ctx, client, "vnode", time.Second)
	wantNotReadyError(t, err, "Ready=False", "KubeletNotReady", "container runtime network not ready")
}
