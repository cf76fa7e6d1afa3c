package discovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/k8snetworkplumbingwg/govdpa/pkg/kvdpa"
	"golang.org/x/sys/unix"
)

// VDPALister lists the node's vDPA devices. The kernel serves them through
// its vdpa netlink family, which not every kernel has; tests use an
// in-memory one.
type VDPALister interface {
	VDPADevices(ctx context.Context) ([]ParentedVDPA, error)
}

// ParentedVDPA is a vDPA device and the PCI function it runs on.
type ParentedVDPA struct {
	VDPADevice
	// Parent is the PCI address of the management device.
	Parent string
}

// KernelVDPA lists vDPA devices through govdpa.
type KernelVDPA struct{}

// vdpaBus is where this host's sysfs shows the kernel's vdpa bus, which
// the vdpa core registers in the same step as its netlink family.
const vdpaBus = "/sys/bus/vdpa"

// VDPADevices lists the vDPA devices whose management device is on PCI.
func (KernelVDPA) VDPADevices(context.Context) ([]ParentedVDPA, error) {
	if err := busMissing(vdpaBus); err != nil {
		return nil, fmt.Errorf("vdpa: the kernel has no vdpa netlink family: %w", err)
	}
	devs, err := kvdpa.ListVdpaDevices()
	if errors.Is(err, unix.ENOENT) {
		return nil, fmt.Errorf("vdpa: the kernel has no vdpa netlink family: %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("vdpa: %w", err)
	}
	var out []ParentedVDPA
	for _, d := range devs {
		mgmt := d.MgmtDev()
		if mgmt == nil || mgmt.BusName() != "pci" {
			continue
		}
		v := ParentedVDPA{Parent: mgmt.DevName(), VDPADevice: VDPADevice{Name: d.Name(), Driver: d.Driver()}}
		if vh := d.VhostVdpa(); vh != nil {
			v.Path = vh.Path()
		}
		if vn := d.VirtioNet(); vn != nil {
			v.Netdev = vn.NetDev()
		}
		out = append(out, v)
	}
	return out, nil
}

// busMissing says when sysfs shows that the kernel has no bus at dir: a
// kernel without vDPA is then not asked over netlink, whose generic
// message header (netlink's Genlmsg.Serialize) reads two bytes past its
// object, which the race detector reports when another goroutine wrote
// the object beside it. Without a sysfs mount at the bus's root the
// kernel is asked.
func busMissing(dir string) error {
	var fs unix.Statfs_t
	root := filepath.Dir(filepath.Dir(dir))
	if unix.Statfs(root, &fs) != nil || fs.Type != unix.SYSFS_MAGIC {
		return nil
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("no bus at %s: %w", dir, unix.ENOENT)
	}
	return nil
}

// vdpaTable is the node's vDPA devices by parent PCI address.
type vdpaTable struct {
	byParent map[string][]VDPADevice
	problem  string
}

func readVDPATable(ctx context.Context, l VDPALister) vdpaTable {
	devs, err := l.VDPADevices(ctx)
	if err != nil {
		return vdpaTable{problem: fmt.Sprintf("%v; no vDPA devices listed", err)}
	}
	t := vdpaTable{byParent: map[string][]VDPADevice{}}
	for _, d := range devs {
		t.byParent[d.Parent] = append(t.byParent[d.Parent], d.VDPADevice)
	}
	return t
}
