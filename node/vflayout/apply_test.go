package vflayout_test

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/node/vflayout"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// The default virtual node's first E810-C: 8 VFs, 6 and 7 on vfio-pci.
const (
	pf  = "0000:3b:00.0"
	vf0 = "0000:3b:01.0"
	vf2 = "0000:3b:01.2"
)

// newNode builds the default virtual node with its kernel emulation
// running, and a Sysfs on its tree.
func newNode(t *testing.T) (*virtualnode.Node, vflayout.Sysfs) {
	t.Helper()
	n := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	vnodetest.EnactWrites(t, n)
	return n, vflayout.Sysfs{Root: n.SysRoot(), Settle: 10 * time.Second}
}

// drivers are the node's VFs of the PF, by index: their drivers.
func drivers(n *virtualnode.Node) []string {
	var out []string
	for _, f := range n.Devices() {
		if f.PF == pf {
			out = append(out, f.Driver)
		}
	}
	return out
}

// ifindexes are the VFs' netdevs' ifindexes, which a VF made again
// changes.
func ifindexes(n *virtualnode.Node) map[string]int {
	out := map[string]int{}
	for _, f := range n.Devices() {
		if f.PF == pf && f.Netdev != nil {
			out[f.Addr] = f.Netdev.Index
		}
	}
	return out
}

// bindings are the PF's VFs' drivers and overrides now.
func bindings(t *testing.T, sys vflayout.Sysfs) []fenceapi.VF {
	t.Helper()
	st, err := sys.Read(pf)
	if err != nil {
		t.Fatal(err)
	}
	return st.Bindings()
}

func want(num int, drivers map[int]string) vflayout.Want {
	if drivers == nil {
		drivers = map[int]string{}
	}
	return vflayout.Want{NumVFs: num, Drivers: drivers}
}

// TestApply: the VF count goes through 0 (the emulation refuses a direct
// change, as the kernel does), then each VF the layout names is rebound;
// a change of bindings alone leaves the count and the other VFs be.
func TestApply(t *testing.T) {
	n, sys := newNode(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name      string
		want      vflayout.Want
		drivers   []string
		recreated bool
	}{
		{"4 VFs, 0-1 on vfio-pci", want(4, map[int]string{0: "vfio-pci", 1: "vfio-pci"}),
			[]string{"vfio-pci", "vfio-pci", "iavf", "iavf"}, true},
		{"VF 1 back to the kernel's choice, 3 to uio", want(4, map[int]string{0: "vfio-pci", 3: "uio_pci_generic"}),
			[]string{"vfio-pci", "iavf", "iavf", "uio_pci_generic"}, false},
		{"8 on the kernel's choice", want(8, nil), []string{"iavf", "iavf", "iavf", "iavf", "iavf", "iavf", "iavf", "iavf"}, true},
		{"none", want(0, nil), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := ifindexes(n)
			changed, err := sys.Apply(ctx, pf, tc.want, vflayout.Before{VFs: bindings(t, sys)})
			if err != nil || !changed {
				t.Fatalf("Apply: changed %t, %v", changed, err)
			}
			if got := drivers(n); !equal(got, tc.drivers) {
				t.Errorf("VF drivers %q, want %q", got, tc.drivers)
			}
			st, err := sys.Read(pf)
			if err != nil || !tc.want.SatisfiedBy(st, "", nil) {
				t.Errorf("Read: %+v, %v; not %s", st, err, tc.want)
			}
			after := ifindexes(n)
			if !tc.recreated && after[vf2] != before[vf2] {
				t.Errorf("VF 2 was made again (ifindex %d, was %d): only bindings changed", after[vf2], before[vf2])
			}
			if tc.recreated && len(before) > 0 && maps.Equal(before, after) {
				t.Errorf("VFs not made again for a new count")
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestApplyUnchangedWritesNothing: a PF already as declared gets no write
// at all: no file of the tree is modified.
func TestApplyUnchangedWritesNothing(t *testing.T) {
	n, sys := newNode(t)
	before := mtimes(t, n.SysRoot())
	changed, err := sys.Apply(t.Context(), pf, want(8, map[int]string{6: "vfio-pci", 7: "vfio-pci"}), vflayout.Before{VFs: bindings(t, sys)})
	if err != nil || changed {
		t.Fatalf("Apply of the layout the PF has: changed %t, %v", changed, err)
	}
	if after := mtimes(t, n.SysRoot()); !maps.Equal(before, after) {
		for p, m := range after {
			if before[p] != m {
				t.Errorf("%s written", p)
			}
		}
	}
}

// mtimes are the modification times of every file of the tree.
func mtimes(t *testing.T, root string) map[string]time.Time {
	t.Helper()
	out := map[string]time.Time{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = info.ModTime()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestApplyRollsBack: a change the kernel refuses half way (more VFs than
// sriov_totalvfs, after the count went to 0) puts the PF back as it was:
// its 8 VFs, 6 and 7 on vfio-pci.
func TestApplyRollsBack(t *testing.T) {
	n, sys := newNode(t)
	orig := drivers(n)
	_, err := sys.Apply(t.Context(), pf, want(300, map[int]string{0: "vfio-pci"}), vflayout.Before{VFs: bindings(t, sys)})
	var ae *vflayout.ApplyError
	if !errors.As(err, &ae) || ae.Rollback != nil {
		t.Fatalf("Apply of 300 VFs on a PF of 256: %v, want an ApplyError with the PF back", err)
	}
	if got := drivers(n); !equal(got, orig) {
		t.Errorf("after the rollback the VFs are on %q, want %q", got, orig)
	}
	t.Log(err)
}

// TestApplyRollsBackExactly: a rollback puts each VF back on the driver it
// had and its driver_override as it was, and says they are back only once
// sysfs shows it. The change names a driver that does not exist for VF 0,
// which the emulation binds without keeping the override, so the change
// fails its last check; VF 3 was unbound, VF 4 had an override naming
// another driver than its own (written, never probed). A "no override
// before" read as "any driver will do" left VF 0 on the missing driver,
// bound VF 3 and gave VF 4 an override of iavf, and said they were back.
func TestApplyRollsBackExactly(t *testing.T) {
	n, sys := newNode(t)
	vf3, vf4 := "0000:3b:01.3", "0000:3b:01.4"
	if err := n.BindDriver(t.Context(), vf3, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.SysRoot(), "bus/pci/devices", vf4, "driver_override"), []byte("vfio-pci\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := bindings(t, sys)
	if before[3] != (fenceapi.VF{}) || before[4] != (fenceapi.VF{Driver: "iavf", Override: "vfio-pci"}) {
		t.Fatalf("VFs 3 and 4 before: %+v, %+v", before[3], before[4])
	}
	_, err := sys.Apply(t.Context(), pf, want(8, map[int]string{0: "no-such-driver", 6: "vfio-pci", 7: "vfio-pci"}), vflayout.Before{VFs: before})
	var ae *vflayout.ApplyError
	if !errors.As(err, &ae) || ae.Rollback != nil || !strings.Contains(err.Error(), "back as they were") {
		t.Fatalf("Apply: %v, want an ApplyError with the PF back as it was", err)
	}
	if after := bindings(t, sys); !slices.Equal(after, before) {
		t.Errorf("after the rollback the VFs are\n%+v\nwant\n%+v", after, before)
	}
}

// TestRestoreSaysWhatDiffers: a rollback that cannot put a VF back says
// which VF is on what, and what it was on, instead of "back as they
// were".
func TestRestoreSaysWhatDiffers(t *testing.T) {
	_, sys := newNode(t)
	// A driver name the kernel cannot have: the bind never shows.
	sys.Settle = 200 * time.Millisecond
	before := bindings(t, sys)
	before[0] = fenceapi.VF{Driver: "no/driver"}
	err := sys.Restore(t.Context(), pf, vflayout.Before{VFs: before})
	want := "VF 0 (0000:3b:01.0) is unbound with driver_override no/driver, it was on no/driver with no driver_override"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Restore: %v, want it to say %q", err, want)
	}
}
