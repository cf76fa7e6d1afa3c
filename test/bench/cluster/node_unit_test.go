package cluster

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// A node that goes NotReady mid-batch must end the wait with the node's
// name and condition, not leave the bench waiting.
func TestNodeNotReadyNamesNodeAndCondition(t *testing.T) {
	api := kubeapi.Start(t)
	client := api.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes := client.CoreV1().Nodes()
	node, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vnode"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
		Reason: "KubeletReady", LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
	if node, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- nodeNotReady(ctx, client, "vnode") }()
	node.Status.Conditions[0].Status = corev1.ConditionUnknown
	node.Status.Conditions[0].Reason = "NodeStatusUnknown"
	node.Status.Conditions[0].Message = "Kubelet stopped posting node status."
	if _, err := nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = <-done
	if !errors.Is(err, errNodeNotReady) {
		t.Fatalf("nodeNotReady = %v, want errNodeNotReady", err)
	}
	for _, want := range []string{"vnode", "Ready=Unknown", "NodeStatusUnknown", "Kubelet stopped posting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
