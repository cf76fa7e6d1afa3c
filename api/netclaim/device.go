package netclaim

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// ClaimRef names a ResourceClaim.
type ClaimRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

func (r ClaimRef) String() string { return r.Namespace + "/" + r.Name }

// Device is one device of a prepared claim as the CNI side needs it.
type Device struct {
	Claim   ClaimRef `json:"claim"`
	Request string   `json:"request"`
	Driver  string   `json:"driver"`
	Pool    string   `json:"pool"`
	Device  string   `json:"device"`
	// Resource is the device's hwnet pool, e.g. intel.com/sriov_a.
	Resource   string `json:"resource"`
	PCIAddress string `json:"pciAddress"`
	// Network is the device's element of its configuration's "networks";
	// nil for a device without one, which a NetworkAttachmentDefinition
	// of its resource may take.
	Network json.RawMessage `json:"network,omitempty"`
	// VF is the settings prepare applied to the VF, nil for none.
	VF *vfsettings.Settings `json:"vf,omitempty"`
}

// Pod is what a Source needs of a pod: its UID, and its namespace and
// ResourceClaim names, since kubelet prepares a shared claim once, for
// its first pod, and never tells the driver of the others.
type Pod struct {
	UID       string
	Namespace string
	Claims    []string
}

// Source lists the devices of the claims prepared for a pod, from local
// state only: the CNI side asks it on every ADD and must not read the API
// server.
type Source interface {
	PodDevices(ctx context.Context, pod Pod) ([]Device, error)
}

// Selections parses the network elements of devs, all together so that
// interface names are unique among them (4.1.2.1.5): one selection per
// device with a network, in order, and the index of its device.
func Selections(devs []Device, podNamespace string) ([]selection.Selection, []int, error) {
	var elems []string
	var idx []int
	for i, d := range devs {
		if len(d.Network) > 0 {
			elems = append(elems, string(d.Network))
			idx = append(idx, i)
		}
	}
	if len(elems) == 0 {
		return nil, nil, nil
	}
	sels, err := selection.ParseList("["+strings.Join(elems, ",")+"]", podNamespace, "the pod's claim networks")
	if err != nil {
		return nil, nil, err
	}
	return sels, idx, nil
}

// PodNetworkKey is hwnet's extension key (NPWG 4.1.2.1 lets a dotted key
// through) of a claim's network element: true says the element's "name" is
// a KEP-3698 PodNetwork, which hwnet resolves to its
// NetworkAttachmentDefinition at the ADD, rather than a NAD.
const PodNetworkKey = "multinetwork.hwnet.io/podNetwork"

// podNetworkFlag is the one key of an element PodNetworkOf reads.
type podNetworkFlag struct {
	PodNetwork bool   `json:"multinetwork.hwnet.io/podNetwork"`
	Name       string `json:"name"`
}

// PodNetworkOf is the PodNetwork a network element names, "" when it names
// a NetworkAttachmentDefinition.
func PodNetworkOf(element json.RawMessage) string {
	var f podNetworkFlag
	if len(element) == 0 || json.Unmarshal(element, &f) != nil || !f.PodNetwork {
		return ""
	}
	return f.Name
}

// DeviceStatus is what the CNI side reports of one claimed device attached
// to a network: the KEP-4817 networkData of its claim's status.devices
// entry. Addresses are in CIDR form, as networkData.ips requires.
type DeviceStatus struct {
	Driver          string
	Pool            string
	Device          string
	InterfaceName   string
	IPs             []string
	HardwareAddress string
	// Network is the attachment's network, for the Ready condition's
	// message.
	Network string
	// VF is the settings applied to the device's VF, reported in the
	// entry's data; nil for none.
	VF *vfsettings.Settings
	// Representor is the device's representor netdev on its PF's
	// switchdev eSwitch, reported in the entry's data for an OVS/OVN CNI
	// to plug; "" for none.
	Representor string
}
