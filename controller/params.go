package controller

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// paramsReady is hwnet's ParamsReady verdict on parametersRefs (KEP: the
// implementation owns this condition and its reasons): hwnet attaches a
// network through exactly one NetworkAttachmentDefinition, which must
// exist and hold a CNI configuration that parses. defaultNamespace is
// where a reference without a namespace points: a PodNetworkAttachment's
// own, whose author (an application developer, as a pod's) is held to
// --cni-allowed-namespaces by the agent, so here too; none for a
// cluster-scoped PodNetwork, an administrator's, which may name any.
func (c *Controller) paramsReady(refs []mnv1.ParametersRef, defaultNamespace string) verdict {
	if len(refs) != 1 {
		return invalid("hwnet attaches a network through exactly one NetworkAttachmentDefinition; parametersRefs has %d", len(refs))
	}
	ref := refs[0]
	if !ref.IsNAD() {
		return invalid("parametersRefs[0]: group %q kind %q; hwnet reads group k8s.cni.cncf.io kind NetworkAttachmentDefinition", ref.Group, ref.Kind)
	}
	ns := ref.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	if ns == "" {
		return invalid("parametersRefs[0].namespace: required for a PodNetwork, which has no namespace of its own")
	}
	if defaultNamespace != "" {
		if err := c.opts.AllowedNamespaces.Check(defaultNamespace, ns); err != nil {
			return verdict{metav1.ConditionFalse, mnv1.ReasonNamespaceNotAllowed, fmt.Sprintf("parametersRefs[0]: NetworkAttachmentDefinition %s/%s: %v", ns, ref.Name, err)}
		}
	}
	nad, err := c.nads.NetworkAttachmentDefinitions(ns).Get(ref.Name)
	if apierrors.IsNotFound(err) {
		return invalid("NetworkAttachmentDefinition %s/%s does not exist", ns, ref.Name)
	}
	if err != nil {
		return invalid("NetworkAttachmentDefinition %s/%s: %v", ns, ref.Name, err)
	}
	if nad.Spec.Config == "" {
		return verdict{metav1.ConditionTrue, mnv1.ReasonParamsValid, fmt.Sprintf("NetworkAttachmentDefinition %s/%s names a configuration on each node's disk", ns, ref.Name)}
	}
	if _, err := netconf.Parse([]byte(nad.Spec.Config), ref.Name, "NetworkAttachmentDefinition "+ns+"/"+ref.Name); err != nil {
		return invalid("%v", err)
	}
	return verdict{metav1.ConditionTrue, mnv1.ReasonParamsValid, fmt.Sprintf("NetworkAttachmentDefinition %s/%s holds a valid CNI configuration", ns, ref.Name)}
}

func invalid(format string, args ...any) verdict {
	return verdict{metav1.ConditionFalse, mnv1.ReasonParamsInvalid, fmt.Sprintf(format, args...)}
}
