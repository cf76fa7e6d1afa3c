package discovery

import (
	"context"
	"errors"
	"sync"

	"golang.org/x/sys/unix"
)

// absentFamily remembers that the kernel lacks a generic netlink family:
// a kernel without vDPA netlink lacks it at every re-discovery
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

// NewKernelVDPA is the kernel's vDPA netlink (KernelVDPA), asked until it
// says the kernel has none.
func NewKernelVDPA() VDPALister { return &kernelVDPA{vdpa: KernelVDPA{}} }

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
