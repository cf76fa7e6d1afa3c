package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
)

// verdict is one condition's computed state.
type verdict struct {
	status  metav1.ConditionStatus
	reason  string
	message string
}

func isTrue(conds []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(conds, typ)
}

// setConditions writes the verdicts into conds with observedGeneration;
// lastTransitionTime changes only when a status does (meta's rule). It
// reports whether anything changed.
func setConditions(conds *[]metav1.Condition, generation int64, verdicts map[string]verdict) bool {
	changed := false
	for typ, v := range verdicts {
		c := metav1.Condition{Type: typ, Status: v.status, Reason: v.reason, Message: v.message, ObservedGeneration: generation}
		if meta.SetStatusCondition(conds, c) {
			changed = true
		}
	}
	return changed
}

// podNetworkReady is the Ready condition of a PodNetwork (KEP "Status
// Conditions"), from its spec and its ParamsReady condition.
func podNetworkReady(pn *mnv1.PodNetwork) verdict {
	switch {
	case !pn.Spec.IsEnabled():
		return verdict{metav1.ConditionFalse, mnv1.ReasonAdministrativelyDisabled, "spec.enabled is false: no new pods attach to this network"}
	case len(pn.Spec.ParametersRefs) > 0 && !isTrue(pn.Status.Conditions, mnv1.ConditionParamsReady):
		return verdict{metav1.ConditionFalse, mnv1.ReasonParamsNotReady, paramsMessage(pn.Status.Conditions)}
	}
	return verdict{metav1.ConditionTrue, mnv1.ReasonReady, "pods may attach to this network"}
}

// attachmentReady is the Ready condition of a PodNetworkAttachment: its
// PodNetwork's readiness first, then its own parameters'.
func attachmentReady(pna *mnv1.PodNetworkAttachment, pn *mnv1.PodNetwork) verdict {
	switch {
	case pn == nil:
		return verdict{metav1.ConditionFalse, mnv1.ReasonPodNetworkNotReady, "PodNetwork " + pna.Spec.PodNetworkName + " does not exist or is being deleted"}
	case !isTrue(pn.Status.Conditions, mnv1.ConditionReady):
		return verdict{metav1.ConditionFalse, mnv1.ReasonPodNetworkNotReady, "PodNetwork " + pn.Name + " is not Ready"}
	case len(pna.Spec.ParametersRefs) > 0 && !isTrue(pna.Status.Conditions, mnv1.ConditionParamsReady):
		return verdict{metav1.ConditionFalse, mnv1.ReasonParamsNotReady, paramsMessage(pna.Status.Conditions)}
	}
	return verdict{metav1.ConditionTrue, mnv1.ReasonReady, "pods may attach through this attachment"}
}

func paramsMessage(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, mnv1.ConditionParamsReady); c != nil {
		return "ParamsReady is " + string(c.Status) + ": " + c.Message
	}
	return "ParamsReady is not set yet"
}
