package vflayout_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
	"github.com/hwnet-io/hwnet/test/logtest"
)

// fakeESwitch is devlink as ice has it: it refuses a mode change while
// the PF has VFs, and records each set with the PF's VF count then.
type fakeESwitch struct {
	sys vflayout.Sysfs
	mu  sync.Mutex
	// mode is each PF's mode, legacy when absent.
	mode map[string]string
	sets []string
	// fail fails a set to this mode; changed, if set, changes the mode
	// all the same (a driver that fails half way through).
	fail    string
	changed bool
}

func newFakeESwitch(sys vflayout.Sysfs) *fakeESwitch {
	return &fakeESwitch{sys: sys, mode: map[string]string{}}
}

func (f *fakeESwitch) ESwitchMode(_ context.Context, pci string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.mode[pci]; ok {
		return m, nil
	}
	return devlink.ModeLegacy, nil
}

func (f *fakeESwitch) SetESwitchMode(_ context.Context, pci, mode string) error {
	st, err := f.sys.Read(pci)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sets = append(f.sets, fmt.Sprintf("%s at %d VFs", mode, len(st)))
	switch {
	case len(st) > 0:
		return errors.New("device or resource busy: the PF has VFs")
	case mode == f.fail:
		if f.changed {
			f.mode[pci] = mode
		}
		return errors.New("operation not supported")
	}
	f.mode[pci] = mode
	return nil
}

// AddSF fails as ice's devlink does for an mlx5 port flavour.
func (f *fakeESwitch) AddSF(context.Context, string, int) error {
	return errors.New("operation not supported")
}

// DeleteSF fails as AddSF does.
func (f *fakeESwitch) DeleteSF(context.Context, string, int) error {
	return errors.New("operation not supported")
}

func (f *fakeESwitch) record() (sets []string, mode string) {
	mode, _ = f.ESwitchMode(context.Background(), pf)
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sets), mode
}

func withMode(w vflayout.Want, mode string) vflayout.Want {
	w.ESwitchMode = mode
	return w
}

// TestApplyESwitchModeThroughZeroVFs: a mode change on a PF with VFs
// takes them to 0, sets the mode (the fake refuses it with VFs present,
// as ice does), then lays the VFs out; a change back goes the same way.
func TestApplyESwitchModeThroughZeroVFs(t *testing.T) {
	n, sys := newNode(t)
	es := newFakeESwitch(sys)
	sys.ESwitch = es
	for _, tc := range []struct {
		mode, want string
		drivers    []string
	}{
		{devlink.ModeSwitchdev, "switchdev at 0 VFs", []string{"vfio-pci", "iavf", "iavf", "iavf"}},
		{devlink.ModeLegacy, "legacy at 0 VFs", []string{"vfio-pci", "iavf", "iavf", "iavf"}},
	} {
		changed, err := sys.Apply(t.Context(), pf, withMode(want(4, map[int]string{0: "vfio-pci"}), tc.mode), vflayout.Before{VFs: bindings(t, sys), Mode: devlink.ModeLegacy})
		if err != nil || !changed {
			t.Fatalf("%s: Apply: changed %t, %v", tc.mode, changed, err)
		}
		sets, mode := es.record()
		if mode != tc.mode || sets[len(sets)-1] != tc.want {
			t.Errorf("%s: mode %s, sets %q; want the last %q", tc.mode, mode, sets, tc.want)
		}
		if got := drivers(n); !equal(got, tc.drivers) {
			t.Errorf("%s: VF drivers %q, want %q", tc.mode, got, tc.drivers)
		}
	}
}

// TestApplyESwitchRollsBack: a mode change that fails, when the mode is
// set, half way through it, or after it (more VFs than the PF has), puts
// the PF back: its mode, then its 8 VFs, 6 and 7 on vfio-pci.
func TestApplyESwitchRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fail    string
		changed bool
		num     int
		sets    []string
	}{
		{"the set fails", devlink.ModeSwitchdev, false, 4, []string{"switchdev at 0 VFs"}},
		{"the set fails, the mode changed", devlink.ModeSwitchdev, true, 4, []string{"switchdev at 0 VFs", "legacy at 0 VFs"}},
		{"the VFs fail after the set", "", false, 300, []string{"switchdev at 0 VFs", "legacy at 0 VFs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, sys := newNode(t)
			es := newFakeESwitch(sys)
			es.fail, es.changed = tc.fail, tc.changed
			sys.ESwitch = es
			orig, before := drivers(n), bindings(t, sys)
			_, err := sys.Apply(t.Context(), pf, withMode(want(tc.num, nil), devlink.ModeSwitchdev), vflayout.Before{VFs: before, Mode: devlink.ModeLegacy})
			var ae *vflayout.ApplyError
			if !errors.As(err, &ae) || ae.Rollback != nil {
				t.Fatalf("Apply: %v, want an ApplyError with the PF back", err)
			}
			sets, mode := es.record()
			if mode != devlink.ModeLegacy || !slices.Equal(sets, tc.sets) {
				t.Errorf("mode %s, sets %q; want legacy, %q", mode, sets, tc.sets)
			}
			if got := drivers(n); !equal(got, orig) {
				t.Errorf("after the rollback the VFs are on %q, want %q", got, orig)
			}
		})
	}
}

// TestApplyESwitchSatisfiedWritesNothing: a PF in the mode declared,
// with the VFs declared, gets no write: no file of the tree, no set.
func TestApplyESwitchSatisfiedWritesNothing(t *testing.T) {
	n, sys := newNode(t)
	es := newFakeESwitch(sys)
	es.mode[pf] = devlink.ModeSwitchdev
	sys.ESwitch = es
	before := mtimes(t, n.SysRoot())
	w := withMode(want(8, map[int]string{6: "vfio-pci", 7: "vfio-pci"}), devlink.ModeSwitchdev)
	changed, err := sys.Apply(t.Context(), pf, w, vflayout.Before{VFs: bindings(t, sys), Mode: devlink.ModeSwitchdev})
	if err != nil || changed {
		t.Fatalf("Apply of the layout the PF has: changed %t, %v", changed, err)
	}
	if sets, _ := es.record(); len(sets) > 0 || !maps.Equal(before, mtimes(t, n.SysRoot())) {
		t.Errorf("written: sets %q, or a file of the tree", sets)
	}
}

// TestApplyESwitchWithoutDevlink: a layout naming a mode, with no devlink
// to set it with, fails saying so, and writes nothing.
func TestApplyESwitchWithoutDevlink(t *testing.T) {
	n, sys := newNode(t)
	before := mtimes(t, n.SysRoot())
	_, err := sys.Apply(t.Context(), pf, withMode(want(4, nil), devlink.ModeSwitchdev), vflayout.Before{VFs: bindings(t, sys)})
	if err == nil || !strings.Contains(err.Error(), "no devlink") {
		t.Errorf("Apply: %v, want it refused for want of devlink", err)
	}
	if !maps.Equal(before, mtimes(t, n.SysRoot())) {
		t.Error("a file of the tree was written")
	}
}

// TestManagerESwitchFence: the change's fence records the mode before
// and the target; the layout applied, the fence is lifted.
func TestManagerESwitchFence(t *testing.T) {
	n, sys := newNode(t)
	es := newFakeESwitch(sys)
	sys.ESwitch = es
	b := newBookNode(t, n, t.TempDir())
	b.serveKubelet(t)
	fenced := b.lastLayoutChange()
	layout := []pools.PFLayout{{PF: pf, TotalVFs: 256, Switchdev: true, Layout: &pools.VFLayout{Name: "ovs", NumVFs: 4, ESwitchMode: devlink.ModeSwitchdev}}}
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.DiscardHandler)}, layout)
	waitFor(t, "the PF in switchdev mode with 4 VFs, its fence lifted", func() bool {
		_, mode := es.record()
		_, in := b.layoutFence()
		return mode == devlink.ModeSwitchdev && len(drivers(n)) == 4 && !in && len(b.fenceFiles(t)) == 0
	})
	if got := fenced(); got == nil || got.ESwitchModeBefore != devlink.ModeLegacy || got.Target.ESwitchMode != devlink.ModeSwitchdev {
		t.Errorf("fence layout %+v, want legacy before, switchdev the target", got)
	}
}

// TestManagerUndoesADeadAgentsMode: a change an earlier agent left half
// way, in switchdev mode, with no layout declared now, is undone to the
// mode its fence records before, and to its VFs.
func TestManagerUndoesADeadAgentsMode(t *testing.T) {
	n, sys := newNode(t)
	es := newFakeESwitch(sys)
	sys.ESwitch = es
	before := bindings(t, sys)
	b := deadAgentsFenceWith(t, n, &fenceapi.LayoutChange{Name: "dpdk", Before: before, ESwitchModeBefore: devlink.ModeLegacy,
		Target: fenceapi.Layout{NumVFs: 4, ESwitchMode: devlink.ModeSwitchdev}})
	if err := n.SetNumVFs(t.Context(), pf, 0); err != nil {
		t.Fatal(err)
	}
	if err := es.SetESwitchMode(t.Context(), pf, devlink.ModeSwitchdev); err != nil {
		t.Fatal(err)
	}
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.DiscardHandler)}, nil)
	waitFor(t, "the PF back in legacy mode with its VFs, the fence lifted", func() bool {
		_, mode := es.record()
		_, in := b.layoutFence()
		st, err := sys.Read(pf)
		return mode == devlink.ModeLegacy && err == nil && slices.Equal(st.Bindings(), before) && !in
	})
}

// TestManagerESwitchWithoutDevlink: a manager with no devlink fails a
// layout that names a mode before taking the fence, says why and when it
// tries again, and touches no VF.
func TestManagerESwitchWithoutDevlink(t *testing.T) {
	n, sys := newNode(t)
	b := newBookNode(t, n, t.TempDir())
	b.serveKubelet(t)
	logs := &logtest.Buffer{}
	orig := drivers(n)
	layout := []pools.PFLayout{{PF: pf, TotalVFs: 256, Switchdev: true, Layout: &pools.VFLayout{Name: "ovs", NumVFs: 4, ESwitchMode: devlink.ModeSwitchdev}}}
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil))}, layout)
	waitFor(t, "the layout failed for want of devlink", func() bool {
		return logs.Contains(`msg="VF layout not applied: the PF's eSwitch mode cannot be read" pf=0000:3b:00.0 layout=ovs retryIn=30s err="the layout names an eSwitch mode, and this agent has no devlink`)
	})
	if got := drivers(n); !equal(got, orig) {
		t.Errorf("VFs changed: %q", got)
	}
	if _, in := b.layoutFence(); in {
		t.Error("the PF was fenced")
	}
}
