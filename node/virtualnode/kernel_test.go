package virtualnode_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestEnactWrites: writes to the tree's kernel attributes change the node
// as the kernel would: sriov_numvfs through 0 only (a direct change and
// a count beyond sriov_totalvfs are refused, the file written back), a
// VF unbound through its driver/unbind, bound by drivers_probe to its
// driver_override or, without one, to the PF's VF driver, and through a
// driver's bind.
func TestEnactWrites(t *testing.T) {
	n := build(t, virtualnode.DefaultSpec(), false)
	vnodetest.EnactWrites(t, n)
	sys := n.SysRoot()
	pf := filepath.Join(sys, "bus/pci/devices", e810PF)
	write := func(rel, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(sys, rel), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	numVFs := func(want int) func() bool {
		return func() bool {
			links, _ := filepath.Glob(filepath.Join(pf, "virtfn*"))
			return len(links) == want && len(vfsOf(n, e810PF)) == want && attrInt(t, pf, "sriov_numvfs") == want
		}
	}
	driverOf := func(addr, want string) func() bool {
		return func() bool {
			f, _ := n.Device(addr)
			target, err := os.Readlink(filepath.Join(sys, "bus/pci/devices", addr, "driver"))
			if want == "" {
				return f.Driver == "" && os.IsNotExist(err)
			}
			return f.Driver == want && filepath.Base(target) == want
		}
	}
	numvfs := "bus/pci/devices/" + e810PF + "/sriov_numvfs"

	write(numvfs, "4") // 8 to 4 directly: EBUSY
	waitFor(t, "sriov_numvfs written back to 8", func() bool { return readAttr(t, filepath.Join(pf, "sriov_numvfs")) == "8" })
	write(numvfs, "0")
	waitFor(t, "no VFs", numVFs(0))
	write(numvfs, "300") // beyond sriov_totalvfs 256
	waitFor(t, "sriov_numvfs written back to 0", func() bool { return readAttr(t, filepath.Join(pf, "sriov_numvfs")) == "0" })
	write(numvfs, "4")
	waitFor(t, "4 VFs on iavf", func() bool { return numVFs(4)() && driverOf(e810VF0, "iavf")() })

	write("bus/pci/devices/"+e810VF0+"/driver/unbind", e810VF0)
	waitFor(t, "VF 0 unbound", driverOf(e810VF0, ""))
	write("bus/pci/devices/"+e810VF0+"/driver_override", "vfio-pci")
	write("bus/pci/drivers_probe", e810VF0)
	waitFor(t, "VF 0 on vfio-pci", driverOf(e810VF0, "vfio-pci"))

	write("bus/pci/devices/"+e810VF0+"/driver/unbind", e810VF0)
	waitFor(t, "VF 0 unbound again", driverOf(e810VF0, ""))
	write("bus/pci/devices/"+e810VF0+"/driver_override", "")
	write("bus/pci/drivers_probe", e810VF0)
	waitFor(t, "VF 0 back on the PF's VF driver", driverOf(e810VF0, "iavf"))

	vf1 := "0000:3b:01.1"
	write("bus/pci/drivers/iavf/unbind", vf1)
	waitFor(t, "VF 1 unbound", driverOf(vf1, ""))
	write("bus/pci/drivers/vfio-pci/bind", vf1)
	waitFor(t, "VF 1 bound through vfio-pci/bind", driverOf(vf1, "vfio-pci"))
}

// TestStateSharedBetweenProcesses: a Node opened on the same directory
// sees the changes another one saved, as the tests see the kernel
// emulation's daemon's.
func TestStateSharedBetweenProcesses(t *testing.T) {
	n := build(t, virtualnode.DefaultSpec(), false)
	other, err := virtualnode.Open(n.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if err := other.SetNumVFs(t.Context(), e810PF, 2); err != nil {
		t.Fatal(err)
	}
	if got := len(vfsOf(n, e810PF)); got != 2 {
		t.Errorf("the first Node sees %d VFs after the other set 2", got)
	}
	if err := n.BindDriver(t.Context(), e810VF0, "vfio-pci"); err != nil {
		t.Fatal(err)
	}
	if f, _ := other.Device(e810VF0); f.Driver != "vfio-pci" || len(vfsOf(other, e810PF)) != 2 {
		t.Errorf("the other Node sees %s on %q, %d VFs", e810VF0, f.Driver, len(vfsOf(other, e810PF)))
	}
}

// waitFor polls cond until it holds or the test's deadline nears.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	if d, ok := t.Deadline(); ok && d.Before(deadline) {
		deadline = d.Add(-time.Second)
	}
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
