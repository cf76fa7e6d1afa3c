package watch

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestFingerprint changes a virtual node's PCI layout as the agent must
// notice: each change must show in the fingerprint as the line the tree
// now has, and a poller's cached scanner must agree with a fresh one.
func TestFingerprint(t *testing.T) {
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	ctx := context.Background()
	scan := newPCIScanner(node.SysRoot())
	warmFingerprint := func() (string, error) {
		fp, err := scan.fingerprint()
		return string(fp), err
	}
	last, err := warmFingerprint()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"0000:3b:00.0 ice 8", "0000:3b:01.0 iavf -", "0000:3b:01.6 vfio-pci -", "0000:41:00.0 mlx5_core 4", "0000:43:00.0 igb -"} {
		if !slices.Contains(strings.Split(last, "\n"), line) {
			t.Errorf("fingerprint lacks %q:\n%s", line, last)
		}
	}
	steps := []struct {
		name    string
		change  func() error
		has     []string
		hasNone []string
	}{{
		name:    "fewer VFs",
		change:  func() error { return node.SetNumVFs(ctx, "0000:3b:00.0", 2) },
		has:     []string{"0000:3b:00.0 ice 2", "0000:3b:01.1 iavf -"},
		hasNone: []string{"0000:3b:01.2 "},
	}, {
		name:   "VF to vfio-pci",
		change: func() error { return node.BindDriver(ctx, "0000:3b:01.0", "vfio-pci") },
		has:    []string{"0000:3b:01.0 vfio-pci -"},
	}, {
		name:   "VF unbound",
		change: func() error { return node.BindDriver(ctx, "0000:3b:01.0", "") },
		has:    []string{"0000:3b:01.0 - -"},
	}, {
		name:    "VF removed",
		change:  func() error { return node.RemoveVF(ctx, "0000:3b:01.1") },
		has:     []string{"0000:3b:00.0 ice 2"},
		hasNone: []string{"0000:3b:01.1 "},
	}, {
		name:   "VFs back",
		change: func() error { return node.SetNumVFs(ctx, "0000:3b:00.0", 0) },
		has:    []string{"0000:3b:00.0 ice 0"},
	}, {
		name:   "more VFs",
		change: func() error { return node.SetNumVFs(ctx, "0000:3b:00.0", 8) },
		has:    []string{"0000:3b:00.0 ice 8", "0000:3b:01.1 iavf -", "0000:3b:01.7 iavf -"},
	}, {
		name:   "PF unbound",
		change: func() error { return node.BindDriver(ctx, "0000:43:00.0", "") },
		has:    []string{"0000:43:00.0 - -"},
	}}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := step.change(); err != nil {
				t.Fatal(err)
			}
			warm, err := warmFingerprint()
			if err != nil {
				t.Fatal(err)
			}
			cold, err := Fingerprint(node.SysRoot())
			if err != nil {
				t.Fatal(err)
			}
			if warm == last {
				t.Fatalf("fingerprint did not change:\n%s", warm)
			}
			if warm != cold {
				t.Errorf("cached scan differs from a fresh one:\n%s\nfresh:\n%s", warm, cold)
			}
			lines := strings.Split(warm, "\n")
			for _, want := range step.has {
				if !slices.Contains(lines, want) {
					t.Errorf("fingerprint lacks %q:\n%s", want, warm)
				}
			}
			for _, gone := range step.hasNone {
				if strings.Contains(warm, gone) {
					t.Errorf("fingerprint still has %q:\n%s", gone, warm)
				}
			}
			last = warm
		})
	}
}

func TestFingerprintMissingTree(t *testing.T) {
	root := filepath.Join(t.TempDir(), "sys")
	_, err := Fingerprint(root)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(root, "bus/pci")) {
		t.Errorf("Fingerprint of a missing tree: error %v, want one naming %s", err, filepath.Join(root, "bus/pci"))
	}
	if _, err := NewPCIPoller(root); err == nil {
		t.Error("NewPCIPoller of a missing tree succeeded")
	}
}

func TestPCIPoller(t *testing.T) {
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	p, err := NewPCIPoller(node.SysRoot())
	if err != nil {
		t.Fatal(err)
	}
	changed := run(t, func(ctx context.Context, out chan<- struct{}) error {
		return p.Run(ctx, 5*time.Millisecond, out)
	})
	expectNone(t, changed, 50*time.Millisecond)
	if err := node.SetNumVFs(context.Background(), "0000:3e:00.0", 4); err != nil {
		t.Fatal(err)
	}
	receive(t, changed)
}

func TestPCIPollerInterval(t *testing.T) {
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	p, err := NewPCIPoller(node.SysRoot())
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background(), 0, make(chan struct{}))
	if err == nil || !strings.Contains(err.Error(), "interval") {
		t.Errorf("Run with interval 0: error %v, want one about the interval", err)
	}
}

// TestFingerprintWarmMakesLittleGarbage: a poller's scan of an unchanged
// node allocates next to nothing per function. At 2048 VFs the scan made
// 676 KB of garbage, which set off a collection of the idle agent's heap
// every few rescans.
func TestFingerprintWarmMakesLittleGarbage(t *testing.T) {
	spec := &virtualnode.Spec{Name: "fp-garbage", PFs: []virtualnode.PFSpec{{Model: "E810-C", Count: 4, VFs: 64}}}
	node := vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), false)
	scan := newPCIScanner(node.SysRoot())
	first, err := scan.fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	functions := bytes.Count(first, []byte("\n"))
	const scans = 10
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range scans {
		if _, err := scan.fingerprint(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	perFunction := float64(after.TotalAlloc-before.TotalAlloc) / scans / float64(functions)
	t.Logf("%.1f bytes allocated per function and scan, %d functions", perFunction, functions)
	if perFunction > 64 {
		t.Errorf("a warm scan allocates %.1f bytes per function, want at most 64", perFunction)
	}
}
