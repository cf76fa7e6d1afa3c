package status

import (
	"encoding/json"
	"fmt"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/devinfo"
)

// Annotation is the pod annotation that holds the list (NPWG 5).
const Annotation = "k8s.v1.cni.cncf.io/network-status"

// NetworkStatus is the status map of one network attachment (NPWG 5.3).
type NetworkStatus struct {
	// Name is "namespace/name" for a NetworkAttachmentDefinition (v1.2)
	// and the plain name of the cluster-wide default network (5.3.1).
	Name      string   `json:"name"`
	Interface string   `json:"interface,omitempty"`
	IPs       []string `json:"ips,omitempty"`
	// MAC is the hardware address as the plugin reported it: 6 bytes for
	// Ethernet, 20 for IP over InfiniBand.
	MAC string `json:"mac,omitempty"`
	// Default is written even when false: 5.3.5 makes the key required.
	Default      bool     `json:"default"`
	DNS          *DNS     `json:"dns,omitempty"`
	DefaultRoute []string `json:"default-route,omitempty"`
	// DeviceInfo is the device the attachment uses (v1.2, NPWG device-info
	// specification).
	DeviceInfo *devinfo.DeviceInfo `json:"device-info,omitempty"`
	// VF is the settings hwnet applied to the attachment's VF through its
	// PF, a non-standard key in reverse domain notation (5.3).
	VF *vfsettings.Settings `json:"io.hwnet.vf,omitempty"`
}

// DNS is the DNS information of an attachment (NPWG 5.3.6).
type DNS struct {
	Nameservers []string `json:"nameservers,omitempty"`
	Domain      string   `json:"domain,omitempty"`
	Search      []string `json:"search,omitempty"`
}

// Encode returns the annotation's value for list, indented as the
// specification's examples are so that it reads well in kubectl describe.
// A nil list is an empty JSON list, never null.
func Encode(list []NetworkStatus) (string, error) {
	if err := validate(list); err != nil {
		return "", err
	}
	if list == nil {
		list = []NetworkStatus{}
	}
	data, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return "", fmt.Errorf("encode %s: %w", Annotation, err)
	}
	return string(data), nil
}

// Decode parses an annotation value, as written by hwnet or any other NPWG
// implementation, and checks it as Encode does. Keys it does not know, such
// as the reverse-domain extension keys 5.3 allows, are ignored.
func Decode(value string) ([]NetworkStatus, error) {
	var list []NetworkStatus
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		return nil, fmt.Errorf("decode %s: %w", Annotation, err)
	}
	if err := validate(list); err != nil {
		return nil, err
	}
	return list, nil
}

// validate checks the rules of 5.3 that a list can break.
func validate(list []NetworkStatus) error {
	defaultAt := -1
	for i, st := range list {
		if err := st.validate(); err != nil {
			return fmt.Errorf("%s[%d]: %w", Annotation, i, err)
		}
		if !st.Default {
			continue
		}
		if defaultAt >= 0 {
			return fmt.Errorf("%s[%d] %q: default is true, but %s[%d] %q is already the default network (5.3.5 allows one)",
				Annotation, i, st.Name, Annotation, defaultAt, list[defaultAt].Name)
		}
		defaultAt = i
	}
	return nil
}

func (st *NetworkStatus) validate() error {
	if st.Name == "" {
		return fmt.Errorf("name is empty (5.3.1 requires it)")
	}
	if st.MAC != "" && st.Interface == "" {
		return fmt.Errorf("%q: mac %q without interface (5.3.4 requires interface with mac)", st.Name, st.MAC)
	}
	if st.DeviceInfo != nil {
		if err := st.DeviceInfo.Validate(); err != nil {
			return fmt.Errorf("%q: device-info: %w", st.Name, err)
		}
	}
	return nil
}
