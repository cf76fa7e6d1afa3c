package handout

import (
	"encoding/json"
	"fmt"
	"strings"

	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// DefaultCDIDir is where the runtime reads CDI specs that come and go.
const DefaultCDIDir = "/var/run/cdi"

// CDIVersion is the oldest CDI version with everything hwnet's specs use,
// so that older runtimes read them too.
const CDIVersion = "0.5.0"

// CDIEdits hands out a device's nodes read-write, at their host paths,
// and names the device in HWNET_DEVICE_<NAME>=<PCI address> (CDIEnvName):
// CDI refuses a device without edits, and a netdev VF has no device node.
func CDIEdits(name string, d *Device) cdispec.ContainerEdits {
	edits := cdispec.ContainerEdits{Env: []string{CDIEnvName(name) + "=" + d.ID}}
	for _, n := range d.Nodes {
		edits.DeviceNodes = append(edits.DeviceNodes, &cdispec.DeviceNode{Path: n, HostPath: n, Permissions: "rw"})
	}
	return edits
}

// CDIEnvName is HWNET_DEVICE_ and a CDI device's name in upper case, every
// character a shell variable name may not hold written as '_':
// HWNET_DEVICE_PCI_0000_3B_01_6 for pci-0000-3b-01-6, and
// HWNET_DEVICE_0000_3B_01_6 for 0000:3b:01.6.
func CDIEnvName(name string) string {
	return "HWNET_DEVICE_" + strings.Map(func(r rune) rune {
		if ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, strings.ToUpper(name))
}

// MarshalCDISpec is the file a spec is written as.
func MarshalCDISpec(spec *cdispec.Spec) ([]byte, error) {
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("CDI spec: %w", err)
	}
	return data, nil
}

// WriteCDISpec writes spec to path whole: the runtime watches the
// directory and must never read half a spec.
func WriteCDISpec(path string, spec *cdispec.Spec) error {
	data, err := MarshalCDISpec(spec)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("CDI spec: %w", err)
	}
	return nil
}
