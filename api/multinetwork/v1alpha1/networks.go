package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NetworksAnnotation carries a pod's network references, the KEP's
// PodSpec.networks, as a JSON list of Network.
const NetworksAnnotation = Group + "/networks"

// NetworksStatusAnnotation carries the KEP's PodStatus.networks, a JSON
// list of NetworkStatus, written with k8s.v1.cni.cncf.io/network-status.
const NetworksStatusAnnotation = Group + "/networks-status"

// Network is one PodNetwork a pod attaches to (KEP "Attaching PodNetwork to
// a Pod"): by Name, or through the PodNetworkAttachment AttachmentName in the
// pod's namespace.
type Network struct {
	Name           string `json:"name,omitempty"`
	AttachmentName string `json:"attachmentName,omitempty"`
	InterfaceName  string `json:"interfaceName,omitempty"`
	IsDefaultGW    bool   `json:"isDefaultGW,omitempty"`
}

// NetworkStatus is one attached PodNetwork in the pod's status (KEP
// "Status"): one IP per family at most, so one entry per address.
type NetworkStatus struct {
	Name          string `json:"name"`
	InterfaceName string `json:"interfaceName"`
	IP            string `json:"ip,omitempty"`
	IsDefaultGW   bool   `json:"isDefaultGW,omitempty"`
}

// maxInterfaceName is Linux's IFNAMSIZ less the terminating NUL.
const maxInterfaceName = 15

// ParseNetworks parses and statically validates the networks annotation
// (KEP "Static validations"). An empty value is no references: the pod gets
// the default network (KEP "Auto-population").
func ParseNetworks(value string) ([]Network, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(value))
	dec.DisallowUnknownFields()
	var nets []Network
	if err := dec.Decode(&nets); err != nil {
		return nil, fmt.Errorf("annotation %s: not a JSON list of {name|attachmentName, interfaceName, isDefaultGW}: %w", NetworksAnnotation, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("annotation %s: data after the JSON list", NetworksAnnotation)
	}
	if err := validateNetworks(nets); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", NetworksAnnotation, err)
	}
	return nets, nil
}

func validateNetworks(nets []Network) error {
	var errs []error
	names := map[string]int{}
	ifNames := map[string]int{}
	defaultGW := -1
	for i, n := range nets {
		if err := validateNetwork(n); err != nil {
			errs = append(errs, fmt.Errorf("networks[%d]: %w", i, err))
			continue
		}
		if j, dup := names[n.Name]; dup && n.Name != "" {
			errs = append(errs, fmt.Errorf("networks[%d].name: PodNetwork %q is already referenced by networks[%d]; a pod references a PodNetwork once", i, n.Name, j))
		}
		names[n.Name] = i
		if j, dup := ifNames[n.InterfaceName]; dup && n.InterfaceName != "" {
			errs = append(errs, fmt.Errorf("networks[%d].interfaceName: %q is already used by networks[%d]", i, n.InterfaceName, j))
		}
		ifNames[n.InterfaceName] = i
		if n.IsDefaultGW && defaultGW >= 0 {
			errs = append(errs, fmt.Errorf("networks[%d].isDefaultGW: networks[%d] already holds the default gateway; at most one may", i, defaultGW))
		} else if n.IsDefaultGW {
			defaultGW = i
		}
	}
	return errors.Join(errs...)
}

func validateNetwork(n Network) error {
	switch {
	case (n.Name == "") == (n.AttachmentName == ""):
		return errors.New(`exactly one of "name" and "attachmentName" must be set`)
	case n.Name != "":
		if msgs := validation.IsDNS1123Subdomain(n.Name); len(msgs) > 0 {
			return fmt.Errorf("name %q: %s", n.Name, strings.Join(msgs, "; "))
		}
	default:
		if msgs := validation.IsDNS1123Subdomain(n.AttachmentName); len(msgs) > 0 {
			return fmt.Errorf("attachmentName %q: %s", n.AttachmentName, strings.Join(msgs, "; "))
		}
	}
	if n.InterfaceName != "" {
		if err := ValidateInterfaceName(n.InterfaceName); err != nil {
			return fmt.Errorf("interfaceName %q: %w", n.InterfaceName, err)
		}
	}
	return nil
}

// ValidateInterfaceName applies Linux's rules for a netdev name (KEP
// "InterfaceName naming constraints"): 1 to 15 bytes, not "." or "..", no
// '/', ':' or whitespace.
func ValidateInterfaceName(name string) error {
	switch {
	case name == "" || len(name) > maxInterfaceName:
		return fmt.Errorf("must be 1 to %d bytes long", maxInterfaceName)
	case name == "." || name == "..":
		return errors.New(`must not be "." or ".."`)
	case strings.ContainsAny(name, "/:\"\\") || strings.IndexFunc(name, isSpace) >= 0:
		return errors.New("must not contain '/', ':', quotes, backslashes or whitespace")
	}
	return nil
}

func isSpace(r rune) bool { return r <= ' ' || r == 0x7f }

// EncodeNetworksStatus renders the networks-status annotation.
func EncodeNetworksStatus(st []NetworkStatus) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return "", fmt.Errorf("encode %s: %w", NetworksStatusAnnotation, err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// PodUses is what a pod that has not ended references (KEP "InUse
// state"): its networks, or the default network for a pod with none (KEP
// "Auto-population"). A pod that ended, one on the host's network and one
// whose annotation does not parse (admission refuses those) use nothing.
func PodUses(pod *corev1.Pod) []Network {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed || pod.Spec.HostNetwork {
		return nil
	}
	nets, err := ParseNetworks(pod.Annotations[NetworksAnnotation])
	if err != nil {
		return nil
	}
	if len(nets) == 0 {
		return []Network{{Name: DefaultPodNetwork}}
	}
	return nets
}
