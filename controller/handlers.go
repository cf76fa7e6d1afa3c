package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
)

// addHandlers turns each informer event into the keys whose decisions it
// may change.
func (c *Controller) addHandlers() error {
	for _, h := range []struct {
		inf cache.SharedIndexInformer
		fn  func(obj any)
	}{
		{c.pods, c.podChanged},
		{c.podNetworks, c.podNetworkChanged},
		{c.attachments, c.attachmentChanged},
		{c.nadInformer, c.nadChanged},
	} {
		_, err := h.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    h.fn,
			UpdateFunc: func(oldObj, newObj any) { h.fn(oldObj); h.fn(newObj) },
			DeleteFunc: func(obj any) {
				if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = tomb.Obj
				}
				h.fn(obj)
			},
		})
		if err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
	}
	return nil
}

// podChanged: the pod's gate, and the in-use state of what it references.
// A pod's references are read anew from the annotation, so a pod that has
// just ended still releases what it used.
func (c *Controller) podChanged(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if gated(pod) {
		c.queue.Add(key{kind: kindPod, namespace: pod.Namespace, name: pod.Name})
	}
	nets, err := mnv1.ParseNetworks(pod.Annotations[mnv1.NetworksAnnotation])
	if err != nil {
		return
	}
	if len(nets) == 0 {
		c.queue.Add(key{kind: kindPodNetwork, name: mnv1.DefaultPodNetwork})
	}
	for _, n := range nets {
		if n.Name != "" {
			c.queue.Add(key{kind: kindPodNetwork, name: n.Name})
		} else {
			c.queue.Add(key{kind: kindAttachment, namespace: pod.Namespace, name: n.AttachmentName})
		}
	}
}

// podNetworkChanged: the network, the attachments to it and the gated pods
// waiting for it.
func (c *Controller) podNetworkChanged(obj any) {
	pn, err := mnv1.FromUnstructured[mnv1.PodNetwork](obj)
	if err != nil {
		return
	}
	c.queue.Add(key{kind: kindPodNetwork, name: pn.Name})
	pnas, _ := c.attachments.GetIndexer().ByIndex(byPodNetwork, pn.Name)
	for _, obj := range pnas {
		if pna, err := mnv1.FromUnstructured[mnv1.PodNetworkAttachment](obj); err == nil {
			c.queue.Add(key{kind: kindAttachment, namespace: pna.Namespace, name: pna.Name})
		}
	}
	c.enqueueGatedPods(podNetworkKey + pn.Name)
}

// attachmentChanged: the attachment, its network's in-use state and the
// gated pods waiting for it.
func (c *Controller) attachmentChanged(obj any) {
	pna, err := mnv1.FromUnstructured[mnv1.PodNetworkAttachment](obj)
	if err != nil {
		return
	}
	c.queue.Add(key{kind: kindAttachment, namespace: pna.Namespace, name: pna.Name})
	c.queue.Add(key{kind: kindPodNetwork, name: pna.Spec.PodNetworkName})
	c.enqueueGatedPods(attachmentKey + pna.Namespace + "/" + pna.Name)
}

// nadChanged: every network and attachment whose parameters it may be.
// They are few, and a NAD's name says nothing of who references it.
func (c *Controller) nadChanged(any) {
	for _, name := range c.podNetworks.GetIndexer().ListKeys() {
		c.queue.Add(key{kind: kindPodNetwork, name: name})
	}
	for _, k := range c.attachments.GetIndexer().ListKeys() {
		ns, name, _ := strings.Cut(k, "/")
		c.queue.Add(key{kind: kindAttachment, namespace: ns, name: name})
	}
}

func (c *Controller) enqueueGatedPods(reference string) {
	pods, _ := c.pods.GetIndexer().ByIndex(byReference, reference)
	for _, obj := range pods {
		if pod, ok := obj.(*corev1.Pod); ok && gated(pod) {
			c.queue.Add(key{kind: kindPod, namespace: pod.Namespace, name: pod.Name})
		}
	}
}

// referencedBy returns the pods (that have not ended) referencing reference.
func (c *Controller) referencedBy(reference string) []*corev1.Pod {
	objs, _ := c.pods.GetIndexer().ByIndex(byReference, reference)
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, obj := range objs {
		if pod, ok := obj.(*corev1.Pod); ok {
			pods = append(pods, pod)
		}
	}
	return pods
}
