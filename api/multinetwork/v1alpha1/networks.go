package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
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

// MaxNetworks bounds the references of one pod. The KEP sets no bound;
// hwnet's lets the admission policy skip its checks of each reference on a
// long list (its duplicate checks are quadratic, and the API server
// evaluates every message expression on every request), so that it refuses
// the list for its length, in milliseconds, rather than after seconds by
// running out of CEL cost budget.
const MaxNetworks = 32

// networkKeys are the keys an element of the annotation may hold, with
// whether the value is a string (else a boolean).
var networkKeys = map[string]bool{"name": true, "attachmentName": true, "interfaceName": true, "isDefaultGW": false}

// ParseNetworks parses and statically validates the networks annotation
// (KEP "Static validations"). An empty or blank value is no references: the
// pod gets the default network (KEP "Auto-population").
//
// This is the one definition of a valid value: the admission policy
// hwnet-pod-networks (deploy/multinetwork/admission.yaml) applies the same
// rules in CEL, and deploy/multinetwork_parity_test.go requires the two to
// agree. CEL has no JSON decoder, so the grammar is one that regular
// expressions read exactly: a JSON list of flat objects whose keys appear
// once each, spelled exactly, with string values that have no backslash
// escapes. Go's own decoder would be laxer (keys matched without regard to
// case, null for any value, repeated keys, escapes), and a pod the policy
// admits but this parser refuses stays gated forever.
func ParseNetworks(value string) ([]Network, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	nets, err := decodeNetworks(value)
	if err == nil {
		err = validateNetworks(nets)
	}
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", NetworksAnnotation, err)
	}
	return nets, nil
}

// decodeNetworks reads value as the annotation's grammar (ParseNetworks).
func decodeNetworks(value string) ([]Network, error) {
	if i := strings.IndexByte(value, '\\'); i >= 0 {
		return nil, fmt.Errorf("backslash at byte %d: escapes are not accepted", i)
	}
	dec := json.NewDecoder(strings.NewReader(value))
	if err := expectDelim(dec, '['); err != nil {
		return nil, fmt.Errorf("not a JSON list of {name|attachmentName, interfaceName, isDefaultGW}: %w", err)
	}
	var nets []Network
	for dec.More() {
		n, err := decodeNetwork(dec)
		if err != nil {
			return nil, fmt.Errorf("networks[%d]: %w", len(nets), err)
		}
		nets = append(nets, n)
	}
	if err := expectDelim(dec, ']'); err != nil {
		return nil, fmt.Errorf("networks[%d]: %w", len(nets), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON list")
	}
	return nets, nil
}

// decodeNetwork reads one element: an object with each key of networkKeys
// at most once and exactly one of "name" and "attachmentName". A key
// present with an empty string counts as present, as it does for the
// policy's regular expressions: "interfaceName":"" is refused here,
// "name":"" by validateNetwork.
func decodeNetwork(dec *json.Decoder) (Network, error) {
	var n Network
	if err := expectDelim(dec, '{'); err != nil {
		return n, err
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return n, err
		}
		key, _ := tok.(string) // the decoder returns an object's keys as strings
		if _, known := networkKeys[key]; !known || seen[key] {
			return n, fmt.Errorf("key %q: each element holds only \"name\" or \"attachmentName\", \"interfaceName\" and \"isDefaultGW\", each once", key)
		}
		seen[key] = true
		if err := decodeValue(dec, key, &n); err != nil {
			return n, fmt.Errorf("%s: %w", key, err)
		}
	}
	if err := expectDelim(dec, '}'); err != nil {
		return n, err
	}
	if seen["name"] == seen["attachmentName"] {
		return n, errors.New(`exactly one of "name" and "attachmentName" must be set`)
	}
	if seen["interfaceName"] && n.InterfaceName == "" {
		return n, fmt.Errorf("interfaceName %q: %w", "", ValidateInterfaceName(""))
	}
	return n, nil
}

// decodeValue reads key's value into n: a string, or for isDefaultGW a
// boolean; null is neither.
func decodeValue(dec *json.Decoder, key string, n *Network) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if !networkKeys[key] {
		b, ok := tok.(bool)
		if !ok {
			return fmt.Errorf("%s is not true or false", describe(tok))
		}
		n.IsDefaultGW = b
		return nil
	}
	s, ok := tok.(string)
	if !ok {
		return fmt.Errorf("%s is not a string", describe(tok))
	}
	switch key {
	case "name":
		n.Name = s
	case "attachmentName":
		n.AttachmentName = s
	default:
		n.InterfaceName = s
	}
	return nil
}

// describe renders a JSON token as it was written, for an error.
func describe(tok json.Token) string {
	if tok == nil {
		return "null"
	}
	if s, ok := tok.(string); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(tok)
}

// expectDelim reads the next token, which must be want.
func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("found %v where %q belongs", tok, want)
	}
	return nil
}

func validateNetworks(nets []Network) error {
	if len(nets) > MaxNetworks {
		return fmt.Errorf("networks: %d references; a pod holds at most %d", len(nets), MaxNetworks)
	}
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
// "InterfaceName naming constraints", the kernel's dev_valid_name): 1 to
// 15 bytes (IFNAMSIZ less the NUL), not "." or "..", no '/', ':' or
// whitespace. It narrows them to printable ASCII, also without '"' and
// '\', for two reasons. The kernel's isspace() counts byte 0xa0 as a
// space, so it refuses every UTF-8 name with that byte ("à" is c3 a0):
// Unicode letters are not a set of names Linux takes. And the admission
// policy, whose regular expressions count characters and not bytes, can
// check a set of single-byte characters exactly; a name of 9 two-byte
// letters once passed the policy's 15 characters and failed this
// function's 15 bytes, leaving the pod gated forever.
func ValidateInterfaceName(name string) error {
	switch {
	case name == "" || len(name) > maxInterfaceName:
		return fmt.Errorf("must be 1 to %d bytes long", maxInterfaceName)
	case name == "." || name == "..":
		return errors.New(`must not be "." or ".."`)
	}
	for i := 0; i < len(name); i++ {
		if !interfaceNameByte(name[i]) {
			return fmt.Errorf("byte %d (%#02x): must be printable ASCII other than '/', ':', '\"' and '\\'", i, name[i])
		}
	}
	return nil
}

// interfaceNameByte is the admission policy's character class
// [!#-.0-9;-\[\]-~]: printable ASCII less space, '"', '/', ':' and '\'.
func interfaceNameByte(c byte) bool {
	return c > ' ' && c < 0x7f && !strings.ContainsRune(`"/:\`, rune(c))
}

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

// ValidatePod applies the KEP's static validations to a pod at create:
// ParseNetworks' rules on the annotation, and no annotation at all on a pod
// on the host's network (KEP: "Ensure Network objects are not specified
// when hostNetwork field is set"), as the admission policy does.
func ValidatePod(pod *corev1.Pod) error {
	value, present := pod.Annotations[NetworksAnnotation]
	if !present {
		return nil
	}
	if pod.Spec.HostNetwork {
		return fmt.Errorf("annotation %s: a pod with spec.hostNetwork cannot reference networks", NetworksAnnotation)
	}
	_, err := ParseNetworks(value)
	return err
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
