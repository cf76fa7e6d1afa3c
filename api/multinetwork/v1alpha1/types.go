package v1alpha1

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version are the API group and version of hwnet's multi-network
// objects; the KEP's objects are core (v1) ones, which a CRD cannot be.
const (
	Group   = "multinetwork.hwnet.io"
	Version = "v1alpha1"
)

// The resources, for dynamic clients and informers.
var (
	PodNetworkResource           = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "podnetworks"}
	PodNetworkAttachmentResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "podnetworkattachments"}
)

// DefaultPodNetwork is the Cluster Default PodNetwork's name (KEP "Default
// PodNetwork"): the network every pod without references attaches to.
const DefaultPodNetwork = "default"

// Provider is the provider value of PodNetworks hwnet implements: hwnet sets
// ParamsReady on these only (KEP "Provider").
const Provider = "hwnet.io/cni"

// Condition types and reasons (KEP "Status Conditions").
const (
	ConditionReady       = "Ready"
	ConditionParamsReady = "ParamsReady"

	ReasonReady                    = "Ready"
	ReasonParamsNotReady           = "ParamsNotReady"
	ReasonAdministrativelyDisabled = "AdministrativelyDisabled"
	ReasonPodNetworkNotReady       = "PodNetworkNotReady"
	// ReasonParamsValid and ReasonParamsInvalid are hwnet's ParamsReady
	// reasons, which the KEP leaves to the implementation.
	ReasonParamsValid   = "ParametersValid"
	ReasonParamsInvalid = "ParametersInvalid"
	// ReasonNamespaceNotAllowed: a PodNetworkAttachment's parameters are in
	// a namespace --cni-allowed-namespaces refuses it, as the agent would.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)

// InUseFinalizer blocks deleting a PodNetwork or PodNetworkAttachment while
// a running pod or a PodNetworkAttachment references it (KEP "InUse state").
const InUseFinalizer = Group + "/in-use"

// SchedulingGate keeps a pod referencing networks Pending until each is
// present and Ready (KEP "Active validations"); admission adds it and the
// controller lifts it.
const SchedulingGate = Group + "/networks-ready"

// PodNetwork represents a logical network in the cluster (KEP "PodNetwork").
type PodNetwork struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodNetworkSpec `json:"spec"`
	Status Status         `json:"status,omitempty"`
}

// PodNetworkSpec is a PodNetwork's specification. Enabled is a pointer
// because the KEP's default is true: absent means true.
type PodNetworkSpec struct {
	Enabled        *bool           `json:"enabled,omitempty"`
	ParametersRefs []ParametersRef `json:"parametersRefs,omitempty"`
	Provider       string          `json:"provider,omitempty"`
}

// IsEnabled reports spec.enabled with its default.
func (s PodNetworkSpec) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// ParametersRef points to an object holding implementation parameters.
type ParametersRef struct {
	Group     string `json:"group"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// IsNAD says whether the reference names a NetworkAttachmentDefinition:
// group k8s.cni.cncf.io, kind NetworkAttachmentDefinition, or the resource
// name the KEP's own example writes in kind.
func (r ParametersRef) IsNAD() bool {
	return r.Group == "k8s.cni.cncf.io" && (r.Kind == "NetworkAttachmentDefinition" || r.Kind == "network-attachment-definitions")
}

// Status is the status of both objects: their conditions.
type Status struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PodNetworkAttachment parameterises one pod's attachment to a PodNetwork
// (KEP "PodNetworkAttachment").
type PodNetworkAttachment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodNetworkAttachmentSpec `json:"spec,omitempty"`
	Status Status                   `json:"status,omitempty"`
}

// PodNetworkAttachmentSpec is a PodNetworkAttachment's specification.
type PodNetworkAttachmentSpec struct {
	PodNetworkName string          `json:"podNetworkName"`
	ParametersRefs []ParametersRef `json:"parametersRefs,omitempty"`
}

// NotReady says why an object with these conditions may not take new pods:
// nil when its Ready condition is True.
func NotReady(conds []metav1.Condition) error {
	c := meta.FindStatusCondition(conds, ConditionReady)
	switch {
	case c == nil:
		return errors.New("no Ready condition yet")
	case c.Status != metav1.ConditionTrue:
		return fmt.Errorf("%s: %s", c.Reason, c.Message)
	}
	return nil
}

// NotReadyNow is NotReady for an object at generation: a Ready condition
// observed at an older generation says nothing of the current spec (a
// network just disabled still shows Ready until the controller sees it).
func NotReadyNow(generation int64, conds []metav1.Condition) error {
	if err := NotReady(conds); err != nil {
		return err
	}
	if c := meta.FindStatusCondition(conds, ConditionReady); c.ObservedGeneration != generation {
		return fmt.Errorf("the Ready condition was observed at generation %d, the spec is at %d", c.ObservedGeneration, generation)
	}
	return nil
}
