package discovery_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// buildLinked makes the default virtual node with its netdevs as real
// veth links in its own network namespace, named name.
func buildLinked(t *testing.T, name string) *virtualnode.Node {
	t.Helper()
	spec := virtualnode.DefaultSpec()
	spec.Name = name
	return vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), true)
}

func discoverLinked(t *testing.T, node *virtualnode.Node) *discovery.Inventory {
	t.Helper()
	return discover(t, vnodetest.OpenDB(t), node, discovery.Options{Netns: "/run/netns/" + node.NetnsName()})
}

// TestDiscoverRootNetlink: on real links, MTU and operstate come from
// netlink, and the NIC carrying the default route is excluded, not hidden.
func TestDiscoverRootNetlink(t *testing.T) {
	node := buildLinked(t, "disc-netlink")
	inv := discoverLinked(t, node)
	for _, want := range node.Devices() {
		got, _ := inv.Function(want.Addr)
		if want.Netdev == nil {
			continue
		}
		if got.Netdev == nil || got.Netdev.StateFrom != "netlink" || got.Netdev.OperState != "up" || got.Netdev.MTU != want.Netdev.MTU {
			t.Errorf("%s: netdev %+v, want state from netlink, up, MTU %d", want.Addr, got.Netdev, want.Netdev.MTU)
		}
	}
	mgmt, _ := inv.Function(mgmtNIC)
	if !mgmt.Netdev.DefaultRoute || len(mgmt.Excluded) != 1 || !strings.Contains(mgmt.Excluded[0], "default route") {
		t.Errorf("mgmt NIC netdev %+v excluded %q, want excluded for the default route", mgmt.Netdev, mgmt.Excluded)
	}
}

// TestDiscoverRootHardwareChanges re-discovers after each change the agent
// must follow: link down, driver rebind, numvfs, VF removal.
func TestDiscoverRootHardwareChanges(t *testing.T) {
	node := buildLinked(t, "disc-changes")
	ctx := t.Context()
	steps := []struct {
		name   string
		change func(context.Context) error
		check  func(t *testing.T, inv *discovery.Inventory)
	}{
		{"link down", func(ctx context.Context) error { return node.SetLinkUp(ctx, pf0ifvf3, false) }, func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.Netdev == nil || f.Netdev.OperState != "down" {
				t.Errorf("netdev %+v, want operstate down", f.Netdev)
			}
		}},
		{"link up", func(ctx context.Context) error { return node.SetLinkUp(ctx, pf0ifvf3, true) }, func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.Netdev == nil || f.Netdev.OperState != "up" {
				t.Errorf("netdev %+v, want operstate up", f.Netdev)
			}
		}},
		{"bind vfio-pci", func(ctx context.Context) error { return node.BindDriver(ctx, pf0vf3, "vfio-pci") }, func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.Driver != "vfio-pci" || f.Netdev != nil || f.VFIODevice == "" {
				t.Errorf("driver %q netdev %+v vfio %q, want vfio-pci without netdev, with a group device", f.Driver, f.Netdev, f.VFIODevice)
			}
		}},
		{"bind iavf", func(ctx context.Context) error { return node.BindDriver(ctx, pf0vf3, "iavf") }, func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.Driver != "iavf" || f.Netdev == nil || f.Netdev.StateFrom != "netlink" {
				t.Errorf("driver %q netdev %+v, want iavf with a netdev netlink sees", f.Driver, f.Netdev)
			}
		}},
		{"numvfs 8 to 4", func(ctx context.Context) error { return node.SetNumVFs(ctx, pf1, 4) }, func(t *testing.T, inv *discovery.Inventory) {
			if pf := findPF(t, inv, pf1); pf.SRIOV.NumVFs != 4 || len(pf.VFs) != 4 {
				t.Errorf("numvfs %d with %d VFs, want 4", pf.SRIOV.NumVFs, len(pf.VFs))
			}
		}},
		{"remove VF", func(ctx context.Context) error { return node.RemoveVF(ctx, pf0vf3) }, func(t *testing.T, inv *discovery.Inventory) {
			if _, ok := inv.Function(pf0vf3); ok {
				t.Errorf("%s still in the inventory after removal", pf0vf3)
			}
			if pf := findPF(t, inv, pf0); len(pf.VFs) != 7 {
				t.Errorf("%d VFs, want 7", len(pf.VFs))
			}
		}},
	}
	for _, s := range steps {
		if err := s.change(ctx); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		t.Run(s.name, func(t *testing.T) { s.check(t, discoverLinked(t, node)) })
	}
}

// TestDiscoverRootNetdevElsewhere: a VF netdev moved into another network
// namespace, which the virtual node's sysfs tree still shows as the
// unnamespaced tree of a container would, is marked elsewhere: netlink's
// listing lacks it. The others are not.
func TestDiscoverRootNetdevElsewhere(t *testing.T) {
	node := buildLinked(t, "disc-elsewhere")
	const pod = "hwnet-disc-elsewhere-pod"
	if out, err := exec.Command("ip", "netns", "add", pod).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", pod).Run() })
	move := exec.Command("ip", "-n", node.NetnsName(), "link", "set", pf0ifvf3, "netns", pod)
	if out, err := move.CombinedOutput(); err != nil {
		t.Fatalf("ip link set netns: %v: %s", err, out)
	}
	inv := discoverLinked(t, node)
	for _, want := range node.Devices() {
		got, _ := inv.Function(want.Addr)
		if want.Netdev == nil || got.Netdev == nil {
			continue
		}
		if got.Netdev.Elsewhere != (want.Addr == pf0vf3) {
			t.Errorf("%s: netdev %s elsewhere=%t, want %t", want.Addr, got.Netdev.Name, got.Netdev.Elsewhere, want.Addr == pf0vf3)
		}
	}
}
