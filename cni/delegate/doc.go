// Package delegate is hwnet's CNI delegating plugin (NPWG multi-network
// specification v1.1 with the v1.2 additions), run inside hwnet-agent. For
// each CNI request the hwnet shim forwards it attaches the cluster-wide
// default network first (NPWG 6.2), then every network the pod's
// k8s.v1.cni.cncf.io/networks annotation selects, each through package chain
// (hwnet's one CNI engine, held to libcni's behaviour by its tests), and
// publishes k8s.v1.cni.cncf.io/network-status.
//
// # Device assignment
//
// A NetworkAttachmentDefinition annotated with k8s.v1.cni.cncf.io/resourceName
// needs one device of that resource per attachment. The devices are the ones
// kubelet allocated to the pod, as its PodResources API reports them, taken
// in this order: containers as kubelet lists them (restartable init
// containers, then containers, each in pod spec order), and within a
// container by device ID, which is the order of the container's
// PCIDEVICE_<RESOURCE> variable. Attachments needing the resource take them
// in annotation order: the first such attachment gets the first device, and
// so on. So network-status, the device-info files and every container's
// PCIDEVICE_ variable agree on which device serves which network, one device
// never serves two attachments, and the same pod always gets the same
// mapping. A pod holding fewer devices than its networks need fails with an
// error naming the resource and the networks.
//
// # Records and serialisation
//
// Before each delegate ADD the attachment is written to an on-disk record
// (package attachments), so DEL can tear down everything, in reverse order,
// even when neither the agent's caches nor the API server are available, and
// the shim can do it alone. Operations on one container hold its record's
// lock, which the shim honours too (NPWG 7.3); different containers proceed
// in parallel.
package delegate
