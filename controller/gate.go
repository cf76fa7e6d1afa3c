package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
)

// Reasons of the pod Events about its networks.
const (
	ReasonNetworkNotReady = "NetworkNotReady"
	ReasonNetworksReady   = "NetworksReady"
)

// syncGatedPod lifts the pod's scheduling gate once every network it
// references is present and Ready (KEP "Active validations"); until then
// the pod stays Pending and hears why.
func (c *Controller) syncGatedPod(ctx context.Context, namespace, name string) error {
	obj, exists, err := c.pods.GetIndexer().GetByKey(namespace + "/" + name)
	podKey := namespace + "/" + name
	if err != nil || !exists {
		c.forget(podKey)
		return err
	}
	pod := obj.(*corev1.Pod)
	if !gated(pod) || pod.DeletionTimestamp != nil {
		c.forget(podKey)
		return nil
	}
	nets, err := mnv1.ParseNetworks(pod.Annotations[mnv1.NetworksAnnotation])
	if err != nil {
		return c.waiting(ctx, pod, podKey, err.Error())
	}
	// The caches first; then, since a lifted gate cannot be put back, the
	// API server: the informers may not yet have delivered a change made
	// just before the pod was created (a network disabled), and the cache
	// would then show a Ready of the generation before. A change still on
	// its way to the informers enqueues the pod again when it lands. A
	// failed read is no answer: it is retried with backoff, since no
	// informer event may ever come to enqueue the pod again.
	why, err := c.waitingFor(pod.Namespace, nets, c.cached())
	if err == nil && why == "" {
		why, err = c.waitingFor(pod.Namespace, nets, c.fromAPIServer(ctx))
	}
	if err != nil {
		return fmt.Errorf("pod %s: check its networks: %w", podKey, err)
	}
	if why != "" {
		return c.waiting(ctx, pod, podKey, why)
	}
	if err := c.liftGate(ctx, pod); err != nil {
		return err
	}
	c.recorder.Eventf(pod, corev1.EventTypeNormal, ReasonNetworksReady, "all %d referenced networks are Ready; scheduling gate %s lifted", len(nets), mnv1.SchedulingGate)
	c.forget(podKey)
	return nil
}

// lookup finds the objects a pod references; nil, nil when there is none
// or it is being deleted.
type lookup struct {
	attachment func(namespace, name string) (*mnv1.PodNetworkAttachment, error)
	podNetwork func(name string) (*mnv1.PodNetwork, error)
}

// cached looks in the informers' caches.
func (c *Controller) cached() lookup {
	return lookup{
		attachment: func(namespace, name string) (*mnv1.PodNetworkAttachment, error) {
			return c.attachment(namespace, name), nil
		},
		podNetwork: func(name string) (*mnv1.PodNetwork, error) { return c.podNetwork(name), nil },
	}
}

// fromAPIServer reads from the API server.
func (c *Controller) fromAPIServer(ctx context.Context) lookup {
	return lookup{
		attachment: func(namespace, name string) (*mnv1.PodNetworkAttachment, error) {
			return getNow[mnv1.PodNetworkAttachment](ctx, c.opts.Dynamic.Resource(mnv1.PodNetworkAttachmentResource).Namespace(namespace), name)
		},
		podNetwork: func(name string) (*mnv1.PodNetwork, error) {
			return getNow[mnv1.PodNetwork](ctx, c.opts.Dynamic.Resource(mnv1.PodNetworkResource), name)
		},
	}
}

// getNow reads the object name through client; nil, nil when there is
// none or it is being deleted, as the caches have it.
func getNow[T mnv1.Object](ctx context.Context, client dynamic.ResourceInterface, name string) (*T, error) {
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if u.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	return mnv1.FromUnstructured[T](u)
}

// waitingFor names the first referenced network that is not usable yet,
// as find has them: "" when all are. An error is a lookup that failed,
// which says nothing of the networks.
func (c *Controller) waitingFor(namespace string, nets []mnv1.Network, find lookup) (string, error) {
	networkOf := map[string]string{} // PodNetwork -> who references it
	for i, n := range nets {
		pnName, who := n.Name, fmt.Sprintf("networks[%d] (PodNetwork %s)", i, n.Name)
		if n.AttachmentName != "" {
			pna, err := find.attachment(namespace, n.AttachmentName)
			switch {
			case err != nil:
				return "", fmt.Errorf("networks[%d]: PodNetworkAttachment %s/%s: %w", i, namespace, n.AttachmentName, err)
			case pna == nil:
				return fmt.Sprintf("networks[%d]: PodNetworkAttachment %s/%s does not exist", i, namespace, n.AttachmentName), nil
			}
			if err := mnv1.NotReadyNow(pna.Generation, pna.Status.Conditions); err != nil {
				return fmt.Sprintf("networks[%d]: PodNetworkAttachment %s/%s is not Ready: %v", i, namespace, n.AttachmentName, err), nil
			}
			pnName, who = pna.Spec.PodNetworkName, fmt.Sprintf("networks[%d] (PodNetworkAttachment %s)", i, n.AttachmentName)
		}
		if prev, dup := networkOf[pnName]; dup {
			return fmt.Sprintf("%s and %s both attach PodNetwork %s; a pod references a PodNetwork once", prev, who, pnName), nil
		}
		networkOf[pnName] = who
		pn, err := find.podNetwork(pnName)
		switch {
		case err != nil:
			return "", fmt.Errorf("%s: PodNetwork %s: %w", who, pnName, err)
		case pn == nil:
			return fmt.Sprintf("%s: PodNetwork %s does not exist or is being deleted", who, pnName), nil
		}
		if err := mnv1.NotReadyNow(pn.Generation, pn.Status.Conditions); err != nil {
			return fmt.Sprintf("%s: PodNetwork %s is not Ready: %v", who, pnName, err), nil
		}
	}
	return "", nil
}

// liftGate removes hwnet's scheduling gate, and only it, from the pod.
func (c *Controller) liftGate(ctx context.Context, pod *corev1.Pod) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"schedulingGates": []map[string]string{
		{"$patch": "delete", "name": mnv1.SchedulingGate}}}})
	if err != nil {
		return err
	}
	_, err = c.opts.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("lift scheduling gate of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// waiting tells the pod why it waits: an Event, and its PodScheduled
// condition.
func (c *Controller) waiting(ctx context.Context, pod *corev1.Pod, podKey, why string) error {
	c.tell(pod, podKey, why)
	return c.showWaiting(ctx, pod, why)
}

// showWaiting puts why on the pod's PodScheduled condition, as KEP-3698
// has the scheduler do when a network fails its checks ("Scheduler
// changes"), through the status subresource. The reason stays the API
// server's SchedulingGated, which kubectl shows and the scheduler leaves
// alone while a gate stands; the message names the network and why.
func (c *Controller) showWaiting(ctx context.Context, pod *corev1.Pod, why string) error {
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated,
		Message: fmt.Sprintf("scheduling gate %s waits for the pod's networks: %s", mnv1.SchedulingGate, why)}
	old := podScheduled(pod)
	if old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		return nil
	}
	if old == nil || old.Status != cond.Status {
		cond.LastTransitionTime = metav1.Now()
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{cond}}})
	if err != nil {
		return err
	}
	_, err = c.opts.Kube.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pod %s/%s: set its %s condition: %w", pod.Namespace, pod.Name, corev1.PodScheduled, err)
	}
	return nil
}

func podScheduled(pod *corev1.Pod) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == corev1.PodScheduled {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// tell posts a Warning Event with why the pod waits, once per reason.
func (c *Controller) tell(pod *corev1.Pod, podKey, why string) {
	c.mu.Lock()
	same := c.lastEvent[podKey] == why
	c.lastEvent[podKey] = why
	c.mu.Unlock()
	if !same {
		c.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonNetworkNotReady, "waiting for networks: %s", why)
	}
}

func (c *Controller) forget(podKey string) {
	c.mu.Lock()
	delete(c.lastEvent, podKey)
	c.mu.Unlock()
}
