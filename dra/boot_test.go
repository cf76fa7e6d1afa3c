package dra_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// TestPrepareAfterReboot: kubelet prepares a node's claims again when it
// starts their pods after the node restarted, and expects a driver to
// make again what the restart took (kubernetes#141433): a claim an
// earlier boot prepared gets its CDI spec and device-info file written
// anew (they were on tmpfs) and its VF settings set again (the VF came
// back with the kernel's); until then the device ledger still has it
// hold its device. A claim of the earlier boot that kubelet unprepares
// instead is not "reset" to what its VF had in that boot.
func TestPrepareAfterReboot(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	bootFile := filepath.Join(dir, "boot_id")
	writeBootID(t, bootFile, "boot-1")
	opts := preparerOptions(n, dir)
	opts.BootIDFile = bootFile
	opts.VFAdmin = vfadmin.NewRecorder(filepath.Join(dir, "boot-1.jsonl"))
	p := newPreparerWith(t, n, opts)
	node := dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}
	if err := p.drv.SetDevices(node, n.pools); err != nil {
		t.Fatal(err)
	}
	restarted := forPod(vfConfig(claim("r", alloc("vfs", netdevVF)), `{"vlan":100}`), "pod-r")
	deleted := forPod(vfConfig(claim("d", alloc("vfs", "pci-0000-3b-01-2")), `{"vlan":200}`), "pod-d")
	before := p.prepare(t, restarted)
	if before.Err != nil {
		t.Fatal(before.Err)
	}
	if res := p.prepare(t, deleted); res.Err != nil {
		t.Fatal(res.Err)
	}

	// The node restarts: /run is empty, the VFs are the kernel's again.
	for _, d := range []string{opts.CDIDir, opts.DevinfoDir} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	writeBootID(t, bootFile, "boot-2")
	rec := vfadmin.NewRecorder(filepath.Join(dir, "boot-2.jsonl"))
	opts.VFAdmin = rec
	p = newPreparerWith(t, n, opts)
	if err := p.drv.SetDevices(node, n.pools); err != nil {
		t.Fatal(err)
	}
	if err := p.drv.ForgetEarlierBoot(); err != nil {
		t.Fatal(err)
	}
	if hs := p.ledger.Snapshot().Holders("0000:3b:01.1"); len(hs) != 1 || hs[0].UID != "r" {
		t.Errorf("holders of 0000:3b:01.1 before kubelet prepares again: %v, want claim r", hs)
	}

	after := p.prepare(t, restarted)
	if after.Err != nil {
		t.Fatal(after.Err)
	}
	if !slices.EqualFunc(after.Devices, before.Devices, func(a, b kubeletplugin.Device) bool { return slices.Equal(a.CDIDeviceIDs, b.CDIDeviceIDs) }) {
		t.Errorf("CDI devices after the restart %+v, before %+v", after.Devices, before.Devices)
	}
	if spec := p.spec(t, "r"); len(spec.Devices) != 1 {
		t.Errorf("CDI spec after the restart has %d devices, want 1", len(spec.Devices))
	}
	if files, err := devinfo.List(opts.DevinfoDir); err != nil || len(files) != 1 {
		t.Errorf("device-info files after the restart: %v (%v), want the one of claim r", files, err)
	}
	if got := vfrecord.Ops(t, rec, "0000:3b:01.1"); !slices.Contains(got, "vlan 100 qos 0 proto 802.1Q") {
		t.Errorf("VF 0000:3b:01.1's calls after the restart %q, want its VLAN set again", got)
	}

	if err := p.unprepare(t, "d"); err != nil {
		t.Fatal(err)
	}
	if got := vfrecord.Ops(t, rec, "0000:3b:01.2"); len(got) != 0 {
		t.Errorf("unprepare of the earlier boot's claim d made calls %q, want none: the restart reset its VF", got)
	}
	cp, err := checkpoint.Load(dra.CheckpointPath("", opts.PluginDir))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cp.Claims["d"]; ok || cp.Claims["r"] == nil || cp.Claims["r"].BootID != "boot-2" {
		t.Errorf("checkpoint after: %+v, want claim r of boot-2 alone", cp.Claims)
	}
}

func writeBootID(t *testing.T, path, id string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}
