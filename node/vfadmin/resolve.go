package vfadmin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// userspaceDrivers are the drivers a VF is bound to for DPDK: a VF bound
// to one has no netdev, and gets its MTU back from its kernel driver
// when it is bound to it again.
var userspaceDrivers = []string{"vfio-pci", "uio_pci_generic", "igb_uio"}

// resolver finds, under a sysfs root, the netdevs a VF's calls go
// through, as they are named now.
type resolver struct{ sysfsRoot string }

func (r resolver) device(pci string) string {
	return filepath.Join(r.sysfsRoot, "bus/pci/devices", pci)
}

// pfNetdev is the PF's netdev now: found by the PF's PCI address when
// the VF names one (a rename or a driver reload moves the name), else
// the name recorded (a record older than PF addresses). A PF, or the VF,
// that is gone took the VF's settings with it (ErrGone); one that is there without a netdev
// (its driver is loading) is ErrNotBack.
func (r resolver) pfNetdev(vf VF) (string, error) {
	if vf.PFPCIAddress == "" || r.sysfsRoot == "" {
		return vf.PF, nil
	}
	dev := r.device(vf.PFPCIAddress)
	if _, err := os.Stat(dev); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("PF %s: %w: its VFs went with it", vf.PFPCIAddress, ErrGone)
	}
	// A VF the PF's driver took away (sriov_numvfs lowered) took its
	// settings with it.
	if _, err := os.Stat(r.device(vf.PCIAddress)); vf.PCIAddress != "" && errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("VF %s of PF %s: %w", vf.PCIAddress, vf.PFPCIAddress, ErrGone)
	}
	name, err := firstNetdev(dev)
	if err != nil {
		return "", fmt.Errorf("PF %s: %w: it has no netdev (its driver is not bound, or is loading): %v", vf.PFPCIAddress, ErrNotBack, err)
	}
	return name, nil
}

// vfNetdev is the VF's own netdev in this network namespace. A VF that is
// gone, or bound to a userspace driver, has none to come back (ErrGone);
// one whose netdev is elsewhere (still in a pod's network namespace) or
// not made yet is ErrNotBack.
func (r resolver) vfNetdev(pci string) (string, error) {
	dev := r.device(pci)
	if _, err := os.Stat(dev); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("VF %s: %w", pci, ErrGone)
	}
	name, err := firstNetdev(dev)
	if err == nil {
		return name, nil
	}
	if drv, _ := os.Readlink(filepath.Join(dev, "driver")); slices.Contains(userspaceDrivers, filepath.Base(drv)) {
		return "", fmt.Errorf("VF %s: %w: bound to %s, it has no netdev", pci, ErrGone, filepath.Base(drv))
	}
	return "", fmt.Errorf("VF %s: %w: no netdev in this network namespace (still in a pod's, or its driver is loading): %v", pci, ErrNotBack, err)
}
