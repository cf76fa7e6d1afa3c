// Package status builds the k8s.v1.cni.cncf.io/network-status pod
// annotation of the NPWG multi-network specification v1.1 (section 5, with
// the v1.2 namespace-qualified names and device-info): one map per network
// attachment, taken from the CNI result of the attachment's ADD.
//
// FromResult reads results of every version libcni produces (0.1.0 to
// 1.1.0) as sections 5.1.1 and 5.3 require: the first interface with a
// sandbox and only its addresses, so that the status shows the pod's
// address rather than that of a host-side interface a plugin also reported.
// Gateways gives what the delegating plugin reports under "default-route"
// (5.3.6.4). Encode and Decode write and read the annotation's value and
// reject lists the specification forbids.
package status
