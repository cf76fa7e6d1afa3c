package controller

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
)

// Index names and key prefixes of the pods' references.
const (
	byReference   = "reference"
	byPodNetwork  = "podNetwork"
	podNetworkKey = "pn:"
	attachmentKey = "pna:"
)

// podReferences are the index keys of what a pod uses (mnv1.PodUses):
// "pn:NAME" for each PodNetwork it names, "pna:NAMESPACE/NAME" for each
// attachment.
func podReferences(pod *corev1.Pod) []string {
	nets := mnv1.PodUses(pod)
	keys := make([]string, 0, len(nets))
	for _, n := range nets {
		if n.Name != "" {
			keys = append(keys, podNetworkKey+n.Name)
		} else {
			keys = append(keys, attachmentKey+pod.Namespace+"/"+n.AttachmentName)
		}
	}
	return keys
}

func gated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == mnv1.SchedulingGate {
			return true
		}
	}
	return false
}

func indexPodReferences(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	return podReferences(pod), nil
}

func indexAttachmentNetwork(obj any) ([]string, error) {
	pna, err := mnv1.FromUnstructured[mnv1.PodNetworkAttachment](obj)
	if err != nil {
		return nil, nil
	}
	return []string{pna.Spec.PodNetworkName}, nil
}

// stripPod keeps what the controller reads of a pod, so a cluster's pods
// cost little memory.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	meta := metav1.ObjectMeta{
		Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp,
	}
	if v, ok := pod.Annotations[mnv1.NetworksAnnotation]; ok {
		meta.Annotations = map[string]string{mnv1.NetworksAnnotation: v}
	}
	status := corev1.PodStatus{Phase: pod.Status.Phase}
	if gated(pod) { // what the controller said on it, so it says it once
		if cond := podScheduled(pod); cond != nil {
			status.Conditions = []corev1.PodCondition{*cond}
		}
	}
	return &corev1.Pod{
		ObjectMeta: meta,
		Spec:       corev1.PodSpec{HostNetwork: pod.Spec.HostNetwork, SchedulingGates: pod.Spec.SchedulingGates},
		Status:     status,
	}, nil
}
