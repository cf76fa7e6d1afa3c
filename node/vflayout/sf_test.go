package vflayout_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/logtest"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// sfESwitch is devlink as mlx5 has it: SF ports added (only in switchdev
// mode) and deleted make and remove the node's SFs, as its kernel
// emulation enacts the devlink record; each is recorded.
type sfESwitch struct {
	*fakeESwitch
	n *virtualnode.Node
	// failAdd fails the port add of this sfnum, -1 none.
	failAdd int
	mu      sync.Mutex
	ports   []string
}

func (f *sfESwitch) AddSF(ctx context.Context, pci string, num int) error {
	f.note(fmt.Sprintf("add %d", num))
	if mode, _ := f.ESwitchMode(ctx, pci); mode != devlink.ModeSwitchdev {
		return errors.New("port add is only supported in eswitch switchdev mode")
	}
	if num == f.failAdd {
		return errors.New("no space left on device")
	}
	return f.n.AddSF(ctx, pci, num)
}

func (f *sfESwitch) DeleteSF(ctx context.Context, pci string, num int) error {
	f.note(fmt.Sprintf("del %d", num))
	return f.n.DeleteSF(ctx, pci, num)
}

func (f *sfESwitch) note(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ports = append(f.ports, s)
}

func (f *sfESwitch) changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ports)
}

// newSFNode builds a ConnectX-6 Dx at pf with 4 VFs and SFs 88 and 89,
// its kernel emulation running, and an mlx5 devlink on it in mode.
func newSFNode(t *testing.T, mode string) (*virtualnode.Node, vflayout.Sysfs, *sfESwitch) {
	t.Helper()
	spec := &virtualnode.Spec{Name: "vflayout-sf", PFs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", VFs: 4, SFs: 2}}}
	n := vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), false)
	vnodetest.EnactWrites(t, n)
	sys := vflayout.Sysfs{Root: n.SysRoot(), Settle: 10 * time.Second}
	es := &sfESwitch{fakeESwitch: newFakeESwitch(sys), n: n, failAdd: -1}
	es.mode[pf] = mode
	sys.ESwitch = es
	return n, sys, es
}

func withSFs(w vflayout.Want, n int) vflayout.Want {
	w.NumSFs = &n
	return w
}

func sfsOf(t *testing.T, sys vflayout.Sysfs) []int {
	t.Helper()
	got, err := sys.SFs(pf, withSFs(vflayout.Want{}, 0))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestApplySFs: a count raised takes the sfnums above the highest, one
// lowered deletes the highest first, so that the PF goes back to the SFs
// it had; the VFs stay as they are, and a count the PF has writes
// nothing.
func TestApplySFs(t *testing.T) {
	n, sys, es := newSFNode(t, devlink.ModeSwitchdev)
	orig := drivers(n)
	for _, tc := range []struct {
		num   int
		sfs   []int
		ports []string
	}{
		{3, []int{88, 89, 90}, []string{"add 90"}},
		{1, []int{88}, []string{"add 90", "del 90", "del 89"}},
		{2, []int{88, 89}, []string{"add 90", "del 90", "del 89", "add 89"}},
		{2, []int{88, 89}, []string{"add 90", "del 90", "del 89", "add 89"}},
	} {
		if _, err := sys.Apply(t.Context(), pf, withSFs(want(4, nil), tc.num), vflayout.Before{VFs: bindings(t, sys)}); err != nil {
			t.Fatalf("%d SFs: %v", tc.num, err)
		}
		if got := sfsOf(t, sys); !slices.Equal(got, tc.sfs) || !slices.Equal(es.changes(), tc.ports) {
			t.Errorf("%d SFs: sfnums %v after ports %q; want %v after %q", tc.num, got, es.changes(), tc.sfs, tc.ports)
		}
	}
	if got := drivers(n); !equal(got, orig) {
		t.Errorf("VFs on %q, want them as they were, %q", got, orig)
	}
}

// TestApplySFsFirstToSwitchdev: SFs asked of a PF in legacy mode are
// added once the layout brings it to switchdev, not before (mlx5 refuses
// a port add in legacy mode).
func TestApplySFsFirstToSwitchdev(t *testing.T) {
	_, sys, es := newSFNode(t, devlink.ModeLegacy)
	w := withMode(withSFs(want(4, nil), 3), devlink.ModeSwitchdev)
	if _, err := sys.Apply(t.Context(), pf, w, vflayout.Before{VFs: bindings(t, sys), Mode: devlink.ModeLegacy}); err != nil {
		t.Fatal(err)
	}
	if sets, mode := es.record(); mode != devlink.ModeSwitchdev || !slices.Equal(es.changes(), []string{"add 90"}) {
		t.Errorf("mode %s (sets %q), ports %q; want switchdev, then add 90", mode, sets, es.changes())
	}
}

// TestApplySFsRollsBack: a port add that fails half way puts the PF back:
// the SFs the change added deleted, its mode back, its VFs as they were.
func TestApplySFsRollsBack(t *testing.T) {
	n, sys, es := newSFNode(t, devlink.ModeSwitchdev)
	es.failAdd = 91
	orig := drivers(n)
	before := vflayout.Before{VFs: bindings(t, sys), Mode: devlink.ModeSwitchdev, SFs: []int{88, 89}, CountsSFs: true}
	_, err := sys.Apply(t.Context(), pf, withSFs(want(2, nil), 4), before)
	var ae *vflayout.ApplyError
	if !errors.As(err, &ae) || ae.Rollback != nil {
		t.Fatalf("Apply: %v, want an ApplyError with the PF back", err)
	}
	if got, ports := sfsOf(t, sys), es.changes(); !slices.Equal(got, []int{88, 89}) || !slices.Equal(ports, []string{"add 90", "add 91", "del 90"}) {
		t.Errorf("sfnums %v after ports %q; want 88 and 89 after add 90, add 91, del 90", got, ports)
	}
	if got := drivers(n); !equal(got, orig) {
		t.Errorf("VFs on %q, want them as they were, %q", got, orig)
	}
}

// sfLayout asks the PF for 3 SFs, its 4 VFs as they are.
var sfLayout = []pools.PFLayout{{PF: pf, PFName: "p0", TotalVFs: 8, Driver: "mlx5_core", ESwitchMode: devlink.ModeSwitchdev, MaxSFs: 252,
	Layout: &pools.VFLayout{Name: "sf", NumVFs: 4, NumSFs: new(3)}}}

// TestManagerSFHeld: an SF a pod holds makes the change wait, naming the
// holder, with no SF touched; once the pod lets go the change is fenced,
// its fence recording the sfnums before and the target count, and
// applied.
func TestManagerSFHeld(t *testing.T) {
	n, sys, es := newSFNode(t, devlink.ModeSwitchdev)
	b := newBookNode(t, n, t.TempDir())
	kubelet := b.serveKubelet(t)
	held := sfName(t, n, 89)
	kubelet.SetPod("default", "sf-user", "nvidia.com/sf", held)
	fenced := b.lastLayoutChange()
	logs := &logtest.Buffer{}
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil))}, sfLayout)
	waitFor(t, "the layout waits for the SF's holder", func() bool {
		return logs.Contains(`msg="VF layout waits" pf=0000:3b:00.0 layout=sf why="device ` + held + ` is held by pod default/sf-user`)
	})
	if ports := es.changes(); len(ports) > 0 {
		t.Fatalf("SF ports changed while one was held: %q", ports)
	}
	kubelet.SetPod("default", "sf-user", "nvidia.com/sf")
	b.book.Refresh(t.Context())
	waitFor(t, "the SFs counted, the fence lifted", func() bool {
		_, in := b.layoutFence()
		return slices.Equal(sfsOf(t, sys), []int{88, 89, 90}) && !in && logs.Contains(`msg="VF layout applied" pf=0000:3b:00.0 layout=sf`)
	})
	if got := fenced(); got == nil || !slices.Equal(got.SFsBefore, []int{88, 89}) || got.Target.NumSFs == nil || *got.Target.NumSFs != 3 {
		t.Errorf("fence layout %+v, want sfnums 88 and 89 before, 3 SFs the target", got)
	}
}

// sfName is the auxiliary device name of the node's SF with this sfnum.
func sfName(t *testing.T, n *virtualnode.Node, num int) string {
	t.Helper()
	f, _ := n.Device(pf)
	for _, sf := range f.SFs {
		if sf.Num == num {
			return sf.Name
		}
	}
	t.Fatalf("no SF %d", num)
	return ""
}

// TestManagerUndoesADeadAgentsSFs: a change an earlier agent left half
// way, an SF added, with no layout declared now, is undone to the sfnums
// its fence records before.
func TestManagerUndoesADeadAgentsSFs(t *testing.T) {
	n, sys, _ := newSFNode(t, devlink.ModeSwitchdev)
	b := deadAgentsFenceWith(t, n, &fenceapi.LayoutChange{Name: "sf", Before: bindings(t, sys), SFsBefore: []int{88, 89},
		Target: fenceapi.Layout{NumVFs: 4, NumSFs: new(3)}})
	if err := n.AddSF(t.Context(), pf, 90); err != nil {
		t.Fatal(err)
	}
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.DiscardHandler)}, nil)
	waitFor(t, "the PF back to SFs 88 and 89, the fence lifted", func() bool {
		_, in := b.layoutFence()
		return slices.Equal(sfsOf(t, sys), []int{88, 89}) && !in
	})
}

// TestSFsSkipsOneGoingAway: an SF deleted between listing the PF's SFs
// and reading its sfnum (its directory gone, as kernfs removes it while
// another reader lists) is not counted and is no error; an sfnum that
// cannot be read for another reason still is one.
func TestSFsSkipsOneGoingAway(t *testing.T) {
	tests := []struct {
		name    string
		sfnum   func(t *testing.T, path string)
		want    []int
		wantErr bool
	}{
		{name: "deleted after the listing", sfnum: func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(path), "gone"), path); err != nil {
				t.Fatal(err)
			}
		}, want: []int{88}},
		{name: "unreadable", sfnum: func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sys := vflayout.Sysfs{Root: t.TempDir()}
			dev := filepath.Join(sys.Root, "bus/pci/devices", pf)
			for name, num := range map[string]string{"mlx5_core.sf.2": "88\n", "mlx5_core.sf.3": ""} {
				if err := os.MkdirAll(filepath.Join(dev, name), 0o755); err != nil {
					t.Fatal(err)
				}
				if num != "" {
					if err := os.WriteFile(filepath.Join(dev, name, "sfnum"), []byte(num), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			tc.sfnum(t, filepath.Join(dev, "mlx5_core.sf.3", "sfnum"))
			got, err := sys.SFs(pf, withSFs(vflayout.Want{}, 1))
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Fatalf("SFs = %v, %v; want %v, an error %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
