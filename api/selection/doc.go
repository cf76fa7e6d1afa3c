// Package selection parses the pod annotation k8s.v1.cni.cncf.io/networks, the
// Network Attachment Selection Annotation of the NPWG multi-network spec
// (section 4), into typed, validated selections: one Selection per attachment
// the pod asks for, in the order given, repeats included (4.2).
//
// Both formats of 4.1 are accepted. The comma-delimited format (4.1.1) lists
// "name" or "namespace/name" references, each trimmed of surrounding blanks.
// The JSON list format (4.1.2) is recognised by a leading '[' and allows the
// keys of 4.1.2.1 plus v1.2's "infiniband-guid". A single JSON object is not a
// list and is refused. An empty value selects nothing.
//
// Every key is checked as 4.1.2.1 specifies. Names and namespaces are DNS-1123
// labels (3.3); an empty or missing namespace is the pod's. Keys without a
// period are reserved by the spec, so an unknown one, or one in the wrong case
// ("Interface", "ifname"), is an error that suggests the key probably meant;
// keys with a period are other implementations' extensions and are ignored. A
// key given twice in one element is an error rather than last-one-wins, since
// different parsers would pick different values. Beyond the spec's wording,
// the checks refuse what the kernel would refuse anyway: multicast and all-zero
// Ethernet "mac" values, and interface names containing '%', which the kernel
// treats as a template (eth%d) rather than a name.
//
// Extension: like Multus, the comma format also takes "name@ifname" and
// "namespace/name@ifname", a shorthand for the JSON "interface" key, validated
// the same way.
//
// Device keys in "cni-args" are refused: "deviceID", "pciBusID" and
// "CNIDeviceInfoFile", in any case. hwnet, as the delegating plugin, picks the
// device from what the device plugin allocated to the pod and hands it to the
// delegate; were a pod able to name a device through "args", it could steer a
// delegate onto a VF allocated to another pod.
//
// Problems are reported all at once, each as a *FieldError naming the element
// (its position from 0, and its name when valid), the key and the value, joined
// with errors.Join. Parse returns no selections when there is any problem: the
// spec makes an invalid annotation invalid as a whole.
//
// Selection keeps values as the annotation gave them (MAC and GUID normalised,
// protocols upper-case and defaulted); RuntimePortMappings and
// Bandwidth.Runtime give the runtimeConfig forms of CNI's CONVENTIONS.md.
package selection
