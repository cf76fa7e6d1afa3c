package netconf

import (
	"fmt"
	"slices"
	"strings"
)

// AllowedNamespacesFlag is the flag of hwnet-agent and hwnet-controller
// that sets AllowedNamespaces: both must judge a reference the same way,
// or the controller calls ready what the agent refuses.
const AllowedNamespacesFlag = "cni-allowed-namespaces"

// AllowedNamespacesUsage is the flag's help.
const AllowedNamespacesUsage = "comma-separated namespaces whose NetworkAttachmentDefinitions any pod (or PodNetworkAttachment) may select besides its own; * for all"

// AllowedNamespaces are the namespaces whose NetworkAttachmentDefinitions an
// object written by an application developer (a pod's annotation, a
// PodNetworkAttachment) may name besides its own namespace; "*" allows
// every one. nil means "default" only (NPWG 7.4). It is a flag.Value.
type AllowedNamespaces []string

// Check refuses a reference from an object in namespace from to a
// NetworkAttachmentDefinition in nadNamespace that the list does not allow,
// naming both namespaces and the list.
func (a AllowedNamespaces) Check(from, nadNamespace string) error {
	list := a.list()
	if nadNamespace == from || slices.Contains(list, nadNamespace) || slices.Contains(list, "*") {
		return nil
	}
	return fmt.Errorf("namespace %q may not select NetworkAttachmentDefinitions in namespace %q (allowed: its own and %s; see --%s)",
		from, nadNamespace, strings.Join(list, ", "), AllowedNamespacesFlag)
}

func (a AllowedNamespaces) list() []string {
	if a == nil {
		return []string{"default"}
	}
	return a
}

// String is the list as the flag takes it.
func (a *AllowedNamespaces) String() string {
	if a == nil {
		return ""
	}
	return strings.Join(a.list(), ",")
}

// Set parses the flag's comma-separated value; an empty one allows only
// each object's own namespace.
func (a *AllowedNamespaces) Set(s string) error {
	out := AllowedNamespaces{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	*a = out
	return nil
}
