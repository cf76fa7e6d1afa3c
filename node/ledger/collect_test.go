package ledger

import (
	"os"
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
