package ledger

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"log/slog"

	"github.com/hwnet-io/hwnet/node/devinfo"
)

// TestCollect: the collector removes the files of its resources' devices
// that nothing holds and that are older than the grace, keeps a held
// device's file whatever holds it (a pod, a claim, a container), never
// touches another resource's files, and removes nothing while a source of
// the ledger is unknown.
func TestCollect(t *testing.T) {
	files := []struct{ res, dev string }{
		{"intel.com/a", "0000:3b:02.0"}, {"intel.com/a", "0000:3b:02.1"}, {"intel.com/a", "0000:3b:02.2"},
		{"intel.com/b", "0000:3b:02.3"}, {"intel.com/b", "0000:3b:02.4"}, {"example.com/other", "0000:3b:02.5"},
	}
	held := map[string][]Holder{
		"0000:3b:02.0": {{Kind: Pod, Resource: "intel.com/a", Namespace: "ns", Name: "p"}},
		"0000:3b:02.1": {{Kind: Claim, Namespace: "ns", Name: "c"}},
		"0000:3b:02.3": {{Kind: Container, Namespace: "ns", Name: "p", Container: "abc"}},
	}
	for _, tc := range []struct {
		name    string
		unknown []string
		grace   time.Duration
		wantIDs []string
	}{
		{"free ones go", nil, 0, []string{"0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.3", "0000:3b:02.5"}},
		{"young ones stay", nil, time.Hour, []string{"0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.2", "0000:3b:02.3", "0000:3b:02.4", "0000:3b:02.5"}},
		{"unknown source keeps all", []string{"kubelet PodResources: down"}, 0, []string{"0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.2", "0000:3b:02.3", "0000:3b:02.4", "0000:3b:02.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range files {
				if err := devinfo.Write(dir, f.res, f.dev, devinfo.NewPCI(devinfo.PCI{PCIAddress: f.dev})); err != nil {
					t.Fatal(err)
				}
			}
			c := &Collector{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
			c.Add("intel.com/a")
			c.Add("intel.com/b")
			// Read after the files were written, as kubelet reports an
			// allocation only after Allocate wrote its file.
			if err := c.Collect(New(held, tc.unknown), tc.grace); err != nil {
				t.Fatal(err)
			}
			if got := remaining(t, dir); !slices.Equal(got, tc.wantIDs) {
				t.Errorf("files left for %q, want %q", got, tc.wantIDs)
			}
		})
	}
}

func remaining(t *testing.T, dir string) []string {
	t.Helper()
	left, err := devinfo.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, f := range left {
		if _, err := os.Stat(f.Path); err == nil {
			ids = append(ids, f.DeviceID)
		}
	}
	slices.Sort(ids)
	return ids
}

// TestCollectorPasses: Run's passes skip one that would see what the last
// saw, yet never one that could remove a file: a file written since, a
// device whose holder went, a file the last pass left because it was
// young, a resource added, or a ledger that was not complete.
func TestCollectorPasses(t *testing.T) {
	const res, held, other = "intel.com/a", "0000:3b:02.0", "0000:3b:02.1"
	holds := map[string][]Holder{held: {{Kind: Pod, Resource: res, Namespace: "ns", Name: "p"}}}
	for _, tc := range []struct {
		name string
		// between runs between the first pass and the second, and gives
		// the second pass's ledger and grace.
		between func(t *testing.T, dir string, c *Collector) (*Ledger, time.Duration)
		want    []string
	}{
		{"nothing changed: skipped", func(t *testing.T, dir string, _ *Collector) (*Ledger, time.Duration) {
			// A file that appears with the directory's time put back is
			// what a skipped pass leaves.
			writeKeepingDirTime(t, dir, res, other)
			return New(holds, nil), 0
		}, []string{held, other}},
		{"a file written since", func(t *testing.T, dir string, _ *Collector) (*Ledger, time.Duration) {
			write(t, dir, res, other)
			return New(holds, nil), 0
		}, []string{held}},
		{"a holder gone", func(t *testing.T, dir string, _ *Collector) (*Ledger, time.Duration) {
			return New(nil, nil), 0
		}, nil},
		{"a resource added", func(t *testing.T, dir string, c *Collector) (*Ledger, time.Duration) {
			writeKeepingDirTime(t, dir, "intel.com/b", other)
			c.Add("intel.com/b")
			return New(holds, nil), 0
		}, []string{held}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, res, held)
			ageDir(t, dir)
			c := &Collector{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
			c.Add(res)
			last, _ := c.pass(New(holds, nil), 0, nil)
			if last == nil {
				t.Fatal("a complete pass that left no young file saw nothing to keep")
			}
			l, grace := tc.between(t, dir, c)
			c.pass(l, grace, last)
			if got := remaining(t, dir); !slices.Equal(got, tc.want) {
				t.Errorf("files left %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("no directory yet: skipped until it is made", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "devinfo")
		c := &Collector{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
		c.Add(res)
		l := New(nil, nil)
		last, _ := c.pass(l, 0, nil)
		if again, _ := c.pass(l, 0, last); last == nil || again != last {
			t.Fatal("a pass that found no directory, after one that found none, looked again: every idle 30 s lists it")
		}
		write(t, dir, res, other)
		ageDir(t, dir)
		c.pass(New(nil, nil), 0, last)
		if got := remaining(t, dir); len(got) != 0 {
			t.Errorf("files left %q once the directory was made, want none", got)
		}
	})
	t.Run("young or unknown: looked at again", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, res, other)
		ageDir(t, dir)
		c := &Collector{Dir: dir, Logger: slog.New(slog.DiscardHandler)}
		c.Add(res)
		if last, young := c.pass(New(nil, nil), time.Hour, nil); last != nil || !young {
			t.Errorf("a pass that left a young file: the next one's to skip %t, young %t; want false, true", last != nil, young)
		}
		if last, _ := c.pass(New(nil, []string{"kubelet PodResources: down"}), 0, nil); last != nil {
			t.Error("a pass with a source unknown is the next one's to skip")
		}
		write(t, dir, res, held)
		if last, _ := c.pass(New(holds, nil), 0, nil); last != nil {
			t.Error("a pass just after the directory changed is the next one's to skip: the directory's time may not move again")
		}
	})
}

// TestCollectorAsksAgain: a round that leaves a file, or Also a spec, for
// being younger than the grace before the ledger was read asks for a read
// afresh (AskAgain): an idle node's ledger asks kubelet every few
// minutes, and the file goes only at a round whose ledger is newer than
// it by the grace. A round that leaves nothing young asks nothing.
func TestCollectorAsksAgain(t *testing.T) {
	const res, dev = "intel.com/a", "0000:3b:02.1"
	holds := map[string][]Holder{dev: {{Kind: Pod, Resource: res, Namespace: "ns", Name: "p"}}}
	for _, tc := range []struct {
		name      string
		ledger    *Ledger
		grace     time.Duration
		alsoYoung bool
		asks      int
	}{
		{"a file younger than the grace", New(nil, nil), time.Hour, false, 1},
		{"a spec younger than the grace", New(nil, nil), 0, true, 1},
		{"an unheld file old enough: removed", New(nil, nil), 0, false, 0},
		{"a held file", New(holds, nil), time.Hour, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			write(t, dir, res, dev)
			asks := 0
			c := &Collector{Dir: dir, Logger: slog.New(slog.DiscardHandler), AskAgain: func() { asks++ },
				Also: func(*Ledger, time.Time) bool { return tc.alsoYoung }}
			c.Add(res)
			tc.ledger.ReadAt = time.Now()
			c.round(tc.ledger, tc.grace, nil)
			if asks != tc.asks {
				t.Errorf("asked again %d times, want %d", asks, tc.asks)
			}
		})
	}
}

// ageDir puts the directory's time an hour back, as a directory written
// long before the pass.
func ageDir(t *testing.T, dir string) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, dir, res, dev string) {
	t.Helper()
	if err := devinfo.Write(dir, res, dev, devinfo.NewPCI(devinfo.PCI{PCIAddress: dev})); err != nil {
		t.Fatal(err)
	}
}

func writeKeepingDirTime(t *testing.T, dir, res, dev string) {
	t.Helper()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	write(t, dir, res, dev)
	if err := os.Chtimes(dir, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
}
