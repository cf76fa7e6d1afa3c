package events

import (
	corev1 "k8s.io/api/core/v1"
)

// Reasons of the Node Events about declarative VFs (vfLayouts).
const (
	ReasonVFLayoutWaiting = "VFLayoutWaiting"
	ReasonVFLayoutApplied = "VFLayoutApplied"
	ReasonVFLayoutFailed  = "VFLayoutFailed"
	ReasonVFLayoutInvalid = "VFLayoutInvalid"
)

// VFLayoutWaiting reports a PF whose declared layout waits, and why: a
// holder of one of its VFs, or a device ledger that cannot say.
func (e *Node) VFLayoutWaiting(pf, layout, why string) {
	if e == nil {
		return
	}
	e.recorder.Eventf(e.node, corev1.EventTypeNormal, ReasonVFLayoutWaiting, "VF layout %s of PF %s waits: %s", layout, pf, why)
}

// VFLayoutApplied reports a PF's VFs changed to its declared layout.
func (e *Node) VFLayoutApplied(pf, layout, what string) {
	if e == nil {
		return
	}
	e.recorder.Eventf(e.node, corev1.EventTypeNormal, ReasonVFLayoutApplied, "VF layout %s applied to PF %s: %s", layout, pf, what)
}

// VFLayoutFailed reports a change that failed, and what the rollback did.
func (e *Node) VFLayoutFailed(pf, layout, why string) {
	if e == nil {
		return
	}
	e.recorder.Eventf(e.node, corev1.EventTypeWarning, ReasonVFLayoutFailed, "VF layout %s of PF %s not applied: %s", layout, pf, why)
}

// VFLayoutInvalid reports a layout the PF cannot take, such as more VFs
// than its sriov_totalvfs: it is not applied.
func (e *Node) VFLayoutInvalid(pf, layout, why string) {
	if e == nil {
		return
	}
	e.recorder.Eventf(e.node, corev1.EventTypeWarning, ReasonVFLayoutInvalid, "VF layout %s cannot apply to PF %s: %s", layout, pf, why)
}
