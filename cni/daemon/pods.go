package daemon

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/cni/status"
)

// podsTimeout bounds the listing of the node's pods: an API server that
// does not answer skips a reconcile round.
const podsTimeout = 30 * time.Second

// nodePods are the API server's pods of the node whose sandbox must exist
// (sandboxMustExist), and the UIDs of those among them that have no
// network-status.
type nodePods struct {
	running    map[podKey]bool
	unreported map[string]bool
}

// sandboxedPods lists the pods the API server has on node whose sandbox
// must exist. It reads the API server's watch cache (resourceVersion 0),
// as the pod informers do: a pod that changed an instant ago may be seen
// as it was, which only keeps more, or writes a network-status again.
func sandboxedPods(ctx context.Context, client kubernetes.Interface, node string) (nodePods, error) {
	ctx, cancel := context.WithTimeout(ctx, podsTimeout)
	defer cancel()
	list, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(), ResourceVersion: "0"})
	if err != nil {
		return nodePods{}, fmt.Errorf("pods of node %s: %w", node, err)
	}
	pods := nodePods{running: map[podKey]bool{}, unreported: map[string]bool{}}
	for i := range list.Items {
		p := &list.Items[i]
		if !sandboxMustExist(p) {
			continue
		}
		pods.running[podKey{p.Namespace, p.Name}] = true
		if _, ok := p.Annotations[status.Annotation]; !ok && !p.Spec.HostNetwork {
			pods.unreported[string(p.UID)] = true
		}
	}
	return pods, nil
}

// sandboxMustExist tells whether kubelet reports the pod with a sandbox
// it has not begun to take down: Running, or Pending with its sandbox
// ready (an init container running); not being deleted, whose sandbox may
// be gone before its status says so; not Succeeded or Failed, whose
// sandbox kubelet may have removed.
func sandboxMustExist(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	switch p.Status.Phase {
	case corev1.PodRunning:
		return true
	case corev1.PodPending:
		return conditionTrue(p, corev1.PodReadyToStartContainers)
	}
	return false
}

func conditionTrue(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
