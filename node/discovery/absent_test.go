package discovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

type countingVDPA struct {
	err   error
	calls int
}

func (c *countingVDPA) VDPADevices(context.Context) ([]ParentedVDPA, error) {
	c.calls++
	return nil, c.err
}

// TestAbsentFamilyAskedOnce: a missing netlink family is asked about once;
// any other failure, which may pass, is asked about every time.
func TestAbsentFamilyAskedOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		calls int
	}{
		{"no family", fmt.Errorf("vdpa: %w", unix.ENOENT), 1},
		{"transient", errors.New("device busy"), 3},
		{"works", nil, 3},
	} {
		vd := &countingVDPA{err: tt.err}
		v := &kernelVDPA{vdpa: vd}
		for range 3 {
			if _, err := v.VDPADevices(context.Background()); !errors.Is(err, tt.err) {
				t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			}
		}
		if vd.calls != tt.calls {
			t.Errorf("%s: vDPA asked %d times; want %d", tt.name, vd.calls, tt.calls)
		}
	}
}

// TestBusMissingFromSysfs: a bus sysfs does not show is missing, and the
// kernel is asked whenever the tree is no sysfs mount.
func TestBusMissingFromSysfs(t *testing.T) {
	notSysfs := t.TempDir()
	for _, tt := range []struct {
		dir     string
		missing bool
	}{
		{"/sys/bus/pci", false},
		{"/sys/bus/hwnet-no-such-bus", true},
		{notSysfs + "/bus/vdpa", false},
	} {
		err := busMissing(tt.dir)
		if got := err != nil; got != tt.missing {
			t.Errorf("busMissing(%q) = %v; want missing %v", tt.dir, err, tt.missing)
		}
		if tt.missing && (!errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), tt.dir)) {
			t.Errorf("busMissing(%q) = %v; want ENOENT naming the directory", tt.dir, err)
		}
	}
}

// TestKernelVDPAWithoutTheBusAsksNoNetlink: on a kernel without vDPA,
// which this host's sysfs shows, the lister answers from sysfs, so that
// discovery under the race detector never runs netlink's generic header
// (busMissing says why).
func TestKernelVDPAWithoutTheBusAsksNoNetlink(t *testing.T) {
	if _, err := os.Stat(vdpaBus); err == nil {
		// skip-ok: a host with vDPA has the bus, so the case tested does not exist there; CI's machines have none (run and passed), and TestBusMissingFromSysfs judges both cases anywhere.
		t.Skipf("this kernel has a vdpa bus at %s", vdpaBus)
	}
	_, err := KernelVDPA{}.VDPADevices(context.Background())
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), "no bus at "+vdpaBus) {
		t.Fatalf("VDPADevices = %v; want ENOENT from the missing bus %s", err, vdpaBus)
	}
}
