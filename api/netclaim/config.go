// Package netclaim is hwnet's network configuration for DRA claims: the
// opaque device configuration a ResourceClaim or DeviceClass gives the
// hwnet.io driver to attach its devices to networks, and the record of
// a prepared claim's devices that the DRA driver keeps and the CNI side
// reads. It parses the networks with api/selection, the parser of the
// NPWG annotation, so both paths take the same keys with the same checks.
package netclaim

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// The opaque configuration's type.
const (
	APIVersion = "hwnet.io/v1alpha1"
	Kind       = "NetworkConfig"
)

// Config is the opaque parameters of hwnet's device configuration:
//
//	{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig",
//	 "networks": [{"name": "sriov-net", "interface": "net1", "ips": ["10.56.0.10/24"]}],
//	 "vf": {"vlan": 100, "maxTxRate": 1000}}
//
//	{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig", "driver": "vfio-pci"}
//
// Networks is a list in the NPWG annotation's JSON format (4.1.2):
// element i attaches the i-th device of the requests the configuration
// applies to; one element without per-device keys attaches them all.
// VF is the settings (package api/vfsettings) every VF the configuration
// applies to gets at prepare; a configuration may give VF settings
// alone, for devices no network attaches (a VF on vfio-pci). Driver is
// the driver prepare binds each VF the configuration applies to, when it
// rests on another (vfio-pci, or the PF's VF netdev driver), and
// unprepare binds back; the pool must allow it (claimDrivers).
type Config struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Networks   json.RawMessage `json:"networks"`
	VF         json.RawMessage `json:"vf,omitempty"`
	Driver     string          `json:"driver,omitempty"`
}

// Networks is a parsed configuration: each selection with its element's
// JSON text, which the CNI side parses again, and the VF settings.
type Networks struct {
	Selections []selection.Selection
	Elements   []json.RawMessage
	VF         vfsettings.Settings
	// Driver is the driver the devices are bound to, "" for the one
	// each has.
	Driver string
}

// Parse parses opaque parameters of a claim in namespace; source names
// them in errors (e.g. `claim default/c config for requests [vfs]`).
func Parse(raw []byte, namespace, source string) (Networks, error) {
	var c Config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Networks{}, fmt.Errorf("%s: %w", source, err)
	}
	if c.APIVersion != APIVersion || c.Kind != Kind {
		return Networks{}, fmt.Errorf("%s: \"apiVersion\" %q, \"kind\" %q: want %q, %q", source, c.APIVersion, c.Kind, APIVersion, Kind)
	}
	if err := checkDriver(c.Driver); err != nil {
		return Networks{}, fmt.Errorf("%s: \"driver\": %q: %w", source, c.Driver, err)
	}
	nw := Networks{Driver: c.Driver}
	if len(c.VF) > 0 {
		vf, err := vfsettings.Parse(c.VF, source+" \"vf\"")
		if err != nil {
			return Networks{}, err
		}
		nw.VF = vf
	}
	if len(bytes.TrimSpace(c.Networks)) == 0 {
		if !nw.VF.IsZero() || nw.Driver != "" {
			return nw, nil
		}
		return Networks{}, fmt.Errorf("%s: \"networks\": required key is missing", source)
	}
	sels, err := selection.ParseList(string(c.Networks), namespace, source+" \"networks\"")
	if err != nil {
		return Networks{}, err
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(c.Networks, &elems); err != nil {
		return Networks{}, fmt.Errorf("%s: \"networks\": %w", source, err)
	}
	if len(sels) == 0 {
		return Networks{}, fmt.Errorf("%s: \"networks\": the list is empty", source)
	}
	nw.Selections, nw.Elements = sels, elems
	return nw, nil
}

// MaxDriverLength is the longest driver name taken: the kernel's are far
// shorter.
const MaxDriverLength = 64

// checkDriver refuses what cannot be a kernel driver's name: it is one
// path element of /sys/bus/pci/drivers.
func checkDriver(name string) error {
	if len(name) > MaxDriverLength {
		return fmt.Errorf("longer than %d characters", MaxDriverLength)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return fmt.Errorf("%q is not a driver name's character (letters, digits, '_', '-')", r)
		}
	}
	return nil
}

// ForDevices gives each of n devices its network element: element i to
// device i, or the only element to every device when it has no key that
// must differ between devices.
func (nw Networks) ForDevices(n int, source string) ([]json.RawMessage, error) {
	if nw.VF.MAC != "" && n > 1 {
		return nil, fmt.Errorf("%s: \"vf\": \"macAddress\" %q cannot serve %d devices: give each device a configuration of its own", source, nw.VF.MAC, n)
	}
	if len(nw.Elements) == 0 {
		return make([]json.RawMessage, n), nil
	}
	if len(nw.Elements) == n {
		return nw.Elements, nil
	}
	if len(nw.Elements) != 1 {
		return nil, fmt.Errorf("%s: \"networks\": %d elements for %d devices: give one element per device, or one for all", source, len(nw.Elements), n)
	}
	if key := perDeviceKey(nw.Selections[0]); key != "" {
		return nil, fmt.Errorf("%s: \"networks\" element 0: %q cannot serve %d devices: give one element per device", source, key, n)
	}
	out := make([]json.RawMessage, n)
	for i := range out {
		out[i] = nw.Elements[0]
	}
	return out, nil
}

// perDeviceKey is a key of s that two attachments cannot share, or "".
func perDeviceKey(s selection.Selection) string {
	switch {
	case s.Interface != "":
		return "interface"
	case len(s.IPs) > 0:
		return "ips"
	case s.MAC != "":
		return "mac"
	case s.InfinibandGUID != "":
		return "infiniband-guid"
	case s.HasDefaultRoute:
		return "default-route"
	}
	return ""
}
