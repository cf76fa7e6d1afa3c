package vflayout_test

import (
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
)

// TestManagerWaitsForHolders: while a pod holds one of the PF's VFs, the
// layout waits and says so (Waiting, the metric) and nothing changes; an
// incomplete ledger cannot say the VFs are free either; once they are,
// the layout is applied.
func TestManagerWaitsForHolders(t *testing.T) {
	n, sys := newNode(t)
	m := metrics.New()
	var nudged atomicFlag
	mgr := vflayout.New(vflayout.Options{Sysfs: sys, Log: slog.New(slog.DiscardHandler), Metrics: m, Waiting: nudged.set})
	go mgr.Run(t.Context())
	layouts := []pools.PFLayout{{PF: pf, PFName: "enp59s0f0", TotalVFs: 256, Layout: &pools.VFLayout{Name: "dpdk", NumVFs: 4,
		Drivers: []pools.VFDriver{{VFs: []pools.IndexRange{{First: 0, Last: 1}}, Driver: "vfio-pci"}}}}}
	orig := drivers(n)

	held := ledger.New(map[string][]ledger.Holder{vf2: {{Kind: ledger.Pod, Namespace: "default", Name: "holder", Container: "c", Resource: "intel.com/x"}}}, nil)
	mgr.Update(layouts, held)
	waitFor(t, "the layout waits for the holder", func() bool {
		return mgr.Waiting() && nudged.get() && strings.Contains(scrape(m), `hwnet_vf_layout_waiting{pf="0000:3b:00.0"} 1`)
	})
	mgr.Update(layouts, ledger.New(nil, []string{"kubelet: connection refused"}))
	mgr.Update(layouts, ledger.New(map[string][]ledger.Holder{}, []string{"kubelet: connection refused"}))
	if got := drivers(n); !equal(got, orig) {
		t.Fatalf("VFs changed while held or unknown: %q", got)
	}

	mgr.Update(layouts, ledger.New(map[string][]ledger.Holder{}, nil))
	waitFor(t, "the layout applied once its VFs are free", func() bool {
		return equal(drivers(n), []string{"vfio-pci", "vfio-pci", "iavf", "iavf"}) && !mgr.Waiting() &&
			strings.Contains(scrape(m), `hwnet_vf_layout_changes_total{pf="0000:3b:00.0",result="applied"} 1`)
	})
}

func scrape(m *metrics.Metrics) string {
	rec := httptest.NewRecorder()
	m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// waitFor polls cond until it holds, or fails the test near its deadline.
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

type atomicFlag struct{ v atomic.Bool }

func (f *atomicFlag) set()      { f.v.Store(true) }
func (f *atomicFlag) get() bool { return f.v.Load() }
