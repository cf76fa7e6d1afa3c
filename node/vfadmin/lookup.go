package vfadmin

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// Lookup finds in sysfs the VF at PCI address pci: its PF's PCI address
// and netdev, its index under the PF, and its own netdev's MAC and MTU, which a reset
// puts back (zero when it has no netdev in this network namespace).
func Lookup(sysfsRoot, pci string) (VF, vfsettings.Original, error) {
	dev := filepath.Join(sysfsRoot, "bus/pci/devices", pci)
	pfLink, err := os.Readlink(filepath.Join(dev, "physfn"))
	if err != nil {
		return VF{}, vfsettings.Original{}, fmt.Errorf("device %s is not a VF: %w", pci, err)
	}
	pf := filepath.Base(pfLink)
	vf := VF{PCIAddress: pci, PFPCIAddress: pf, Index: -1}
	if vf.PF, err = firstNetdev(filepath.Join(sysfsRoot, "bus/pci/devices", pf)); err != nil {
		return VF{}, vfsettings.Original{}, fmt.Errorf("VF %s: its PF %s has no netdev to set it through: %w", pci, pf, err)
	}
	links, _ := filepath.Glob(filepath.Join(sysfsRoot, "bus/pci/devices", pf, "virtfn*"))
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && filepath.Base(target) == pci {
			vf.Index, _ = strconv.Atoi(strings.TrimPrefix(filepath.Base(l), "virtfn"))
		}
	}
	if vf.Index < 0 {
		return VF{}, vfsettings.Original{}, fmt.Errorf("VF %s: no virtfn link of its PF %s names it", pci, pf)
	}
	return vf, original(dev), nil
}

// original is the VF netdev's MAC and MTU as sysfs says, zero for what
// cannot be read.
func original(dev string) vfsettings.Original {
	name, err := firstNetdev(dev)
	if err != nil {
		return vfsettings.Original{}
	}
	dir := filepath.Join(dev, "net", name)
	var o vfsettings.Original
	if b, err := os.ReadFile(filepath.Join(dir, "address")); err == nil {
		o.MAC = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile(filepath.Join(dir, "mtu")); err == nil {
		o.MTU, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	return o
}

func firstNetdev(dev string) (string, error) {
	ents, err := os.ReadDir(filepath.Join(dev, "net"))
	if err != nil {
		return "", err
	}
	if len(ents) == 0 {
		return "", fmt.Errorf("%s/net is empty", dev)
	}
	return ents[0].Name(), nil
}
