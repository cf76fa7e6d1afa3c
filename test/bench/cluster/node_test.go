package cluster

import (
	"context"
	"errors"
	"fmt"

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
	lw := cache.NewListWatchFromClient(client.CoreV1().RESTClient(), "nodes", "",
		fields.OneTermEqualSelector("metadata.name", node))
	var bad *corev1.NodeCondition
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Node{}, nil, func(ev watch.Event) (bool, error) {
		n, ok := ev.Object.(*corev1.Node)
		if !ok {
			return false, nil
		}
		bad = notReady(n)
		return bad != nil, nil
	})
	if bad == nil || err != nil {
		return nil
	}
	return fmt.Errorf("%w: node %s has Ready=%s since %s (%s: %s)", errNodeNotReady, node, bad.Status,
		bad.LastTransitionTime.UTC().Format("15:04:05"), bad.Reason, bad.Message)
}

// notReady is the node's Ready condition when it is not True; a node
// without one yet is taken as Ready (kubelet has not reported).
func notReady(n *corev1.Node) *corev1.NodeCondition {
	for i, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status != corev1.ConditionTrue {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
