package vfadmin_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestNetlink_VirtualNode: on the virtual node, whose VF netdevs are real
// links in its network namespace, the MTU is set on the VF's netdev found
// by its PCI address; a PF that is not there is ErrGone, which a reset
// skips, and a VF without a netdev (vfio-pci) is too.
func TestNetlink_VirtualNode(t *testing.T) {
	vnodetest.RequireRoot(t)
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), db, true)
	nsPath := "/run/netns/" + node.NetnsName()
	a := vfadmin.Netlink{SysfsRoot: node.SysRoot(), Netns: nsPath}
	ctx := context.Background()
	if err := a.SetMTU(ctx, vfadmin.VF{PF: "enp59s0f0", Index: 1, PCIAddress: "0000:3b:01.1"}, 9000); err != nil {
		t.Fatal(err)
	}
	if mtu := linkMTU(t, nsPath, "0000:3b:01.1", node.SysRoot()); mtu != 9000 {
		t.Errorf("VF netdev MTU %d, want 9000", mtu)
	}
	gone := vfadmin.VF{PF: "no-such-pf", Index: 1, PCIAddress: "0000:3b:01.1"}
	if err := a.SetVLAN(ctx, gone, 100, 0, vfsettings.ProtoDot1Q); !errors.Is(err, vfadmin.ErrGone) {
		t.Errorf("SetVLAN on a missing PF: %v, want ErrGone", err)
	}
	if err := a.SetMTU(ctx, vfadmin.VF{PF: "enp59s0f0", Index: 6, PCIAddress: "0000:3b:01.6"}, 9000); !errors.Is(err, vfadmin.ErrGone) {
		t.Errorf("SetMTU on a vfio-pci VF: %v, want ErrGone", err)
	}
	vlan, mtu := 100, 9000
	rec := vfsettings.Record{PF: "no-such-pf", Index: 1, PCIAddress: "0000:3b:01.6",
		Settings: vfsettings.Settings{VLAN: &vlan, MTU: &mtu}, Original: vfsettings.Original{MTU: 1500}}
	if err := vfadmin.Reset(ctx, a, rec); err != nil {
		t.Errorf("reset of a gone PF and netdev: %v, want nothing to do", err)
	}
}

func linkMTU(t *testing.T, nsPath, pci, sysRoot string) int {
	t.Helper()
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ents, err := os.ReadDir(filepath.Join(sysRoot, "bus/pci/devices", pci, "net"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("VF %s netdevs %v: %v", pci, ents, err)
	}
	l, err := h.LinkByName(ents[0].Name())
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().MTU
}

// TestLookup_VirtualNode: a VF's PF netdev, index and own MAC and MTU
// come from sysfs; a PF is no VF.
func TestLookup_VirtualNode(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), db, false)
	vf, orig, err := vfadmin.Lookup(node.SysRoot(), "0000:3b:01.1")
	if err != nil {
		t.Fatal(err)
	}
	if vf.PF != "enp59s0f0" || vf.Index != 1 || vf.PCIAddress != "0000:3b:01.1" || orig.MTU == 0 || orig.MAC == "" {
		t.Errorf("Lookup: %+v %+v, want VF 1 of enp59s0f0 with its MAC and MTU", vf, orig)
	}
	if _, _, err := vfadmin.Lookup(node.SysRoot(), "0000:3b:00.0"); err == nil || !strings.Contains(err.Error(), "device 0000:3b:00.0 is not a VF") {
		t.Errorf("Lookup of a PF: %v", err)
	}
}

// TestReset_VirtualNode (issue 42): on the virtual node, with the
// Recorder standing for the kernel's VF calls (its PFs are veths) and
// finding the netdevs in its sysfs as Netlink does: an admin's VLAN 42
// and spoofchk off survive a pod that set VLAN 100 and spoofchk on; the
// PF renamed between the set and the reset is still the one reset (found
// by its PCI address); a reset whose VF netdev is not back yet stays
// pending on disk, withholding nothing else, and succeeds once it is.
func TestReset_VirtualNode(t *testing.T) {
	vnodetest.RequireRoot(t)
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), db, true)
	sys := node.SysRoot()
	ctx := context.Background()
	r := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	r.SysfsRoot = sys
	vf, orig, err := vfadmin.Lookup(sys, "0000:3b:01.1")
	if err != nil {
		t.Fatal(err)
	}
	vlan42, vlan100, off, on, mtu := 42, 100, false, true, 9000
	if err := r.Seed(ctx, vf, vfsettings.Settings{VLAN: &vlan42, SpoofChk: &off}); err != nil {
		t.Fatal(err)
	}
	pod := vfsettings.Settings{VLAN: &vlan100, SpoofChk: &on, MTU: &mtu}
	rec, err := vfadmin.NewRecord(ctx, r, vf, orig, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := vfadmin.Apply(ctx, r, vf, pod, nil); err != nil {
		t.Fatal(err)
	}
	renamed := renameNetdev(t, filepath.Join(sys, "bus/pci/devices", vf.PFPCIAddress, "net"), vf.PF, "pf-renamed")
	vfNet := filepath.Join(sys, "bus/pci/devices", vf.PCIAddress, "net")
	away := vfNet + ".in-a-pod"
	if err := os.Rename(vfNet, away); err != nil { // the VF netdev still in the pod's namespace
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "vf-resets")
	if err := vfreset.Leave(dir, &vfreset.Pending{Record: *rec, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	owed := &vfadmin.Owed{Dir: dir, Admin: r}
	left, err := owed.Settle(ctx)
	if err != nil || len(left) != 1 || !errors.Is(left[0].Err, vfadmin.ErrNotBack) {
		t.Fatalf("settle with the VF netdev away: %+v (%v), want the reset still owed, ErrNotBack", left, err)
	}
	if err := os.Rename(away, vfNet); err != nil {
		t.Fatal(err)
	}
	if left, err := owed.Settle(ctx); err != nil || len(left) != 0 {
		t.Fatalf("settle with the netdev back: %+v (%v), want it done", left, err)
	}
	if pending, err := vfreset.List(dir); err != nil || len(pending) != 0 {
		t.Errorf("pending after the reset: %+v (%v), want none", pending, err)
	}
	got, err := r.Read(ctx, vf)
	if err != nil || *got.VLAN != 42 || *got.SpoofChk || *got.MTU != orig.MTU {
		t.Errorf("after the pod the VF has %+v (%v), want VLAN 42, spoofchk off and MTU %d again", got, err, orig.MTU)
	}
	calls, err := vfadmin.ReadCalls(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	if last := calls[len(calls)-2]; last.Op != "spoofchk" || last.PF != renamed {
		t.Errorf("the reset's spoofchk call %+v, want it through the renamed PF %s", last, renamed)
	}
}

// renameNetdev renames the netdev under a PCI function's net directory,
// as a udev rule or a driver reload does.
func renameNetdev(t *testing.T, netDir, from, to string) string {
	t.Helper()
	if err := os.Rename(filepath.Join(netDir, from), filepath.Join(netDir, to)); err != nil {
		t.Fatal(err)
	}
	return to
}
