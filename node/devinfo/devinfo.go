// Package devinfo reads and writes device information files as the Network
// Plumbing Working Group's Device Information Specification v1.1.0 defines
// them (github.com/k8snetworkplumbingwg/device-info-spec): a device plugin
// writes one file per allocated device under devinfo/dp/, named after the
// resource and the device ID, and the NPWG implementation copies it into a
// file of its own under devinfo/cni/ for each network attachment.
package devinfo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Version is the specification version this package writes.
const Version = "1.1.0"

// The specification's directories.
const (
	BaseDir = "/var/run/k8s.cni.cncf.io/devinfo"
	// DPDir holds the files device plugins write.
	DPDir = BaseDir + "/dp"
	// CNIDir holds the files NPWG implementations and CNI plugins write.
	CNIDir = BaseDir + "/cni"
)

// Type says what kind of device a file describes.
type Type string

// The device types of the specification.
const (
	TypePCI       Type = "pci"
	TypeVDPA      Type = "vdpa"
	TypeVhostUser Type = "vhost-user"
	TypeMemif     Type = "memif"
)

// DeviceInfo is the content of a device information file. Exactly the
// member named by Type is set.
type DeviceInfo struct {
	Type      Type       `json:"type"`
	Version   string     `json:"version"`
	PCI       *PCI       `json:"pci,omitempty"`
	VDPA      *VDPA      `json:"vdpa,omitempty"`
	VhostUser *VhostUser `json:"vhost-user,omitempty"`
	Memif     *Memif     `json:"memif,omitempty"`
}

// PCI describes a PCI function handed to a pod.
type PCI struct {
	// PCIAddress is required, in "dddd:BB:DD.f" form.
	PCIAddress string `json:"pci-address"`
	// VhostNet is the vhost-net device used as an exceptional path.
	VhostNet   string `json:"vhost-net,omitempty"`
	RDMADevice string `json:"rdma-device,omitempty"`
	// PFPCIAddress is the address of a VF's physical function.
	PFPCIAddress      string `json:"pf-pci-address,omitempty"`
	RepresentorDevice string `json:"representor-device,omitempty"`
}

// VDPA describes a vDPA device handed to a pod.
type VDPA struct {
	// ParentDevice is the vDPA device's name on the vdpa bus, e.g. "vdpa0".
	ParentDevice string `json:"parent-device"`
	// Driver is "vhost" or "virtio".
	Driver string `json:"driver"`
	// Path is the vhost-vdpa character device or the virtio device.
	Path              string `json:"path"`
	PCIAddress        string `json:"pci-address,omitempty"`
	PFPCIAddress      string `json:"pf-pci-address,omitempty"`
	RepresentorDevice string `json:"representor-device,omitempty"`
}

// VhostUser describes a vhost-user socket.
type VhostUser struct {
	// Mode is "client" or "server".
	Mode string `json:"mode"`
	Path string `json:"path"`
}

// Memif describes a memif socket.
type Memif struct {
	// Role is "master" or "slave".
	Role string `json:"role"`
	Path string `json:"path"`
	// Mode is "ethernet", "ip" or "inject-punt".
	Mode string `json:"mode"`
}

// NewPCI returns the information of a PCI device at this version.
func NewPCI(pci PCI) *DeviceInfo {
	return &DeviceInfo{Type: TypePCI, Version: Version, PCI: &pci}
}

// NewVDPA returns the information of a vDPA device at this version.
func NewVDPA(vdpa VDPA) *DeviceInfo {
	return &DeviceInfo{Type: TypeVDPA, Version: Version, VDPA: &vdpa}
}

// Parse decodes and validates a device information file's content. Keys
// the specification may add in later minor versions are ignored.
func Parse(data []byte) (*DeviceInfo, error) {
	var info DeviceInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("device info: %w", err)
	}
	if err := info.Validate(); err != nil {
		return nil, err
	}
	return &info, nil
}

// Validate checks what the specification requires: a known type, a 1.x.y
// version and the type's member with its required keys.
func (d *DeviceInfo) Validate() error {
	if err := checkVersion(d.Version); err != nil {
		return err
	}
	switch d.Type {
	case TypePCI:
		if d.PCI == nil {
			return missing("pci", d.Type)
		}
		return required("pci.pci-address", d.PCI.PCIAddress)
	case TypeVDPA:
		return d.VDPA.validate()
	case TypeVhostUser:
		if d.VhostUser == nil {
			return missing("vhost-user", d.Type)
		}
		return firstError(
			oneOf("vhost-user.mode", d.VhostUser.Mode, "client", "server"),
			required("vhost-user.path", d.VhostUser.Path))
	case TypeMemif:
		if d.Memif == nil {
			return missing("memif", d.Type)
		}
		return firstError(
			oneOf("memif.role", d.Memif.Role, "master", "slave"),
			required("memif.path", d.Memif.Path),
			oneOf("memif.mode", d.Memif.Mode, "ethernet", "ip", "inject-punt"))
	}
	return fmt.Errorf("device info: type %q is not one of pci, vdpa, vhost-user, memif", d.Type)
}

func (v *VDPA) validate() error {
	if v == nil {
		return missing("vdpa", TypeVDPA)
	}
	return firstError(
		required("vdpa.parent-device", v.ParentDevice),
		oneOf("vdpa.driver", v.Driver, "vhost", "virtio"),
		required("vdpa.path", v.Path))
}

// checkVersion accepts any MAJOR.MINOR.PATCH of major version 1: minor
// versions only add keys.
func checkVersion(v string) error {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return fmt.Errorf("device info: version %q is not MAJOR.MINOR.PATCH", v)
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return fmt.Errorf("device info: version %q is not MAJOR.MINOR.PATCH", v)
		}
	}
	if parts[0] != "1" {
		return fmt.Errorf("device info: version %q: only major version 1 is supported", v)
	}
	return nil
}

func missing(key string, t Type) error {
	return fmt.Errorf("device info: type %q without its %q key", t, key)
}

func required(key, value string) error {
	if value == "" {
		return fmt.Errorf("device info: %s is required", key)
	}
	return nil
}

func oneOf(key, value string, allowed ...string) error {
	for _, a := range allowed {
		if value == a {
			return nil
		}
	}
	return fmt.Errorf("device info: %s %q is not one of %s", key, value, strings.Join(allowed, ", "))
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
