// Package v1alpha1 is hwnet's form of the KEP-3698 multi-network API
// (../shared/specs/kep-3698-multi-network.txt): the PodNetwork and
// PodNetworkAttachment objects with the KEP's fields, served as custom
// resources of the API group multinetwork.hwnet.io because the KEP never
// merged into the core group, and the pod's network references, which the
// KEP puts in PodSpec.networks and hwnet carries in the
// multinetwork.hwnet.io/networks annotation until such a field exists.
//
// The CRDs, with the KEP's defaults, limits and mutability rules as
// OpenAPI validation and CEL, are deploy/crds/multinetwork.hwnet.io_*.yaml;
// this package holds the Go types the controller and the CNI side read them
// into and the one parser of the pod annotation.
package v1alpha1
