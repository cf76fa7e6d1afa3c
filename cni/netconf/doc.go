// Package netconf turns a NetworkAttachmentDefinition, or a CNI
// configuration file on disk, into the CNI configuration list hwnet runs for
// one network attachment, as the NPWG multi-network specification v1.1
// section 3.4 requires of a CNI delegating plugin:
//
//   - Resolve applies the 3.4.1 order: the object's spec.config, then a
//     same-named .conflist file, then a same-named .conf or .json file, else
//     an error naming the object and the directory searched.
//   - Parse accepts a conf or a conflist, injects the object's name when the
//     JSON has none (3.4.2) and refuses a cniVersion libcni cannot run.
//   - Check verifies that some plugin declares each capability a network
//     selection key needs (4.1.2.1.3.2 and the sections after it); the values
//     themselves reach plugins as runtimeConfig (package chain).
//   - Inject returns a copy carrying what the delegator adds for a pod: the
//     kubelet-allocated device (deviceID, pciBusID), the NPWG device-info
//     file (CNIDeviceInfoFile) and the pod's cni-args (4.1.2.1.6.2).
//   - Bytes is the result as a configuration list, which package chain
//     runs, giving every plugin the list's name and cniVersion (7.1).
//
// A Delegate keeps every top-level key of every plugin as raw JSON, so keys
// hwnet does not know reach the plugin unchanged.
package netconf
