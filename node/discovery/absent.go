package discovery

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// absentFamily remembers that the kernel lacks a generic netlink family:
// a kernel without devlink or vDPA netlink lacks it at every re-discovery
// too, and asking again costs a netlink round trip per PF each time.
type absentFamily struct {
	mu  sync.Mutex
	err error
}

func (a *absentFamily) known() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

func (a *absentFamily) note(err error) error {
	if errors.Is(err, unix.ENOENT) {
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
	}
	return err
}

// NewKernelESwitch is the kernel's devlink (DevlinkESwitch), asked until
// it says the kernel has no devlink: a long-running agent re-discovers on
// every PCI change.
func NewKernelESwitch() ESwitchReader { return &kernelESwitch{devlink: DevlinkESwitch{}} }

// NewKernelVDPA is the kernel's vDPA netlink (KernelVDPA), asked until it
// says the kernel has none.
func NewKernelVDPA() VDPALister { return &kernelVDPA{vdpa: KernelVDPA{}} }

// kernelESwitch is a devlink reader, asked until it says the kernel has
// no devlink.
type kernelESwitch struct {
	absent  absentFamily
	devlink ESwitchReader
}

func (k *kernelESwitch) ESwitchMode(ctx context.Context, pci string) (string, error) {
	if err := k.absent.known(); err != nil {
		return "", err
	}
	mode, err := k.devlink.ESwitchMode(ctx, pci)
	return mode, k.absent.note(err)
}

// kernelVDPA is a vDPA lister, asked until it says the kernel
// has no vDPA netlink.
type kernelVDPA struct {
	absent absentFamily
	vdpa   VDPALister
}

func (k *kernelVDPA) VDPADevices(ctx context.Context) ([]ParentedVDPA, error) {
	if err := k.absent.known(); err != nil {
		return nil, err
	}
	devs, err := k.vdpa.VDPADevices(ctx)
	return devs, k.absent.note(err)
}
