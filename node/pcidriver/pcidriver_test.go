package pcidriver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// The default virtual node's first E810-C's VF 0, on iavf.
const vf0 = "0000:3b:01.0"

func newNode(t *testing.T, settle time.Duration) (*virtualnode.Node, pcidriver.Sysfs) {
	t.Helper()
	n := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	vnodetest.EnactWrites(t, n)
	return n, pcidriver.Sysfs{Root: n.SysRoot(), Settle: settle}
}

// TestRebind: a VF goes from its netdev driver to vfio-pci and back to
// the kernel's choice, as the kernel enacts it: the netdev goes and
// comes, driver_override names the driver asked for and is cleared again.
func TestRebind(t *testing.T) {
	n, sys := newNode(t, 10*time.Second)
	ctx := context.Background()
	tests := []struct {
		to       string
		want     pcidriver.Binding
		netdev   bool
		vfioNode bool
	}{
		{to: "vfio-pci", want: pcidriver.Binding{Driver: "vfio-pci", Override: "vfio-pci"}},
		{to: "", want: pcidriver.Binding{Driver: "iavf"}, netdev: true},
		{to: "iavf", want: pcidriver.Binding{Driver: "iavf", Override: "iavf"}, netdev: true},
		{to: "", want: pcidriver.Binding{Driver: "iavf"}, netdev: true},
	}
	for _, tt := range tests {
		if err := sys.Rebind(ctx, vf0, sys.Driver(vf0), tt.to); err != nil {
			t.Fatalf("rebind to %q: %v", tt.to, err)
		}
		got, err := sys.Read(vf0)
		if err != nil {
			t.Fatal(err)
		}
		if got != tt.want {
			t.Errorf("rebind to %q: %+v, want %+v", tt.to, got, tt.want)
		}
		f, _ := n.Device(vf0)
		if (f.Netdev != nil) != tt.netdev {
			t.Errorf("rebind to %q: netdev %v, want one: %v", tt.to, f.Netdev, tt.netdev)
		}
	}
}

// TestProbeDriverItCannotTake: an override naming a driver the kernel
// does not have, or a netdev driver of another device, leaves the
// function unbound, and Probe says so once Settle passed instead of
// waiting on.
func TestProbeDriverItCannotTake(t *testing.T) {
	for _, driver := range []string{"no-such-driver", "mlx5_core"} {
		t.Run(driver, func(t *testing.T) {
			_, sys := newNode(t, pcidriver.DefaultSettle)
			ctx := context.Background()
			if err := sys.Unbind(ctx, vf0, sys.Driver(vf0)); err != nil {
				t.Fatal(err)
			}
			// Only the bind that never comes is waited for briefly: on a
			// loaded machine it is no nearer.
			short := sys
			short.Settle = 200 * time.Millisecond
			err := short.Probe(ctx, vf0, driver)
			if err == nil || !strings.Contains(err.Error(), "bound to "+driver+": not so after") {
				t.Fatalf("probe to %s: %v, want it not bound after Settle", driver, err)
			}
			if d := sys.Driver(vf0); d != "" {
				t.Errorf("VF on %q after a probe to %s, want it unbound", d, driver)
			}
		})
	}
}
