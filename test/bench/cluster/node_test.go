package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// errNodeNotReady: the node stopped being Ready; nothing it runs will
// finish, so the bench gives up rather than wait out every timeout.
var errNodeNotReady = errors.New("node not Ready")

// nodeNotReady waits until the node's Ready condition is other than True
// (kubelet died, or reports itself unhealthy) and returns an error naming
// the node and the condition; nil when ctx ends first.
func nodeNotReady(ctx context.Context, client kubernetes.Interface, node string) error {
	n, err := watchNode(ctx, client, node, func(n *corev1.Node) bool { return notReady(n) != nil })
	if err != nil {
		return nil
	}
	return fmt.Errorf("%w: %s", errNodeNotReady, describe(node, notReady(n)))
}

// waitNodeReady waits, up to wait, until the node is Ready: kubelet
// reports NotReady for a while after a stack's CNI agent restarted (the
// runtime's network status), and a batch starts on a Ready node only.
func waitNodeReady(ctx context.Context, client kubernetes.Interface, node string, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var last *corev1.NodeCondition
	_, err := watchNode(ctx, client, node, func(n *corev1.Node) bool {
		last = notReady(n)
		return last == nil
	})
	if err != nil {
		return fmt.Errorf("%w after %s: %s", errNodeNotReady, wait, describe(node, last))
	}
	return nil
}

// watchNode follows the node until done says so, and returns the node
// then; an error when ctx ends first.
func watchNode(ctx context.Context, client kubernetes.Interface, node string, done func(*corev1.Node) bool) (*corev1.Node, error) {
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", "",
		fields.OneTermEqualSelector("metadata.name", node))
	ev, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(ev watch.Event) (bool, error) {
		n, ok := ev.Object.(*corev1.Node)
		return ok && done(n), nil
	})
	if err != nil {
		return nil, err
	}
	return ev.Object.(*corev1.Node), nil
}

// notReady is the node's Ready condition when it is not True (a stand-in
// when kubelet has not reported one); nil when the node is Ready.
func notReady(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return &n.Status.Conditions[i]
		}
	}
	return &corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NoReadyCondition",
		Message: "kubelet has not reported the node's Ready condition"}
}

func describe(node string, c *corev1.NodeCondition) string {
	if c == nil {
		return "node " + node + " not seen"
	}
	return fmt.Sprintf("node %s has Ready=%s since %s (%s: %s)", node, c.Status,
		c.LastTransitionTime.UTC().Format("15:04:05"), c.Reason, c.Message)
}
