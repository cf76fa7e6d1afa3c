package vflayout_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/logtest"
	"github.com/hwnet-io/hwnet/test/testkubelet"
	clocktesting "k8s.io/utils/clock/testing"
)

// dpdkLayout asks the default node's first E810-C for 4 VFs, 0-1 on
// vfio-pci.
var dpdkLayout = []pools.PFLayout{{PF: pf, PFName: "enp59s0f0", TotalVFs: 256, Layout: &pools.VFLayout{Name: "dpdk", NumVFs: 4,
	Drivers: []pools.VFDriver{{VFs: []pools.IndexRange{{First: 0, Last: 1}}, Driver: "vfio-pci"}}}}}

// dpdkDrivers are the PF's VFs' drivers under dpdkLayout.
var dpdkDrivers = []string{"vfio-pci", "vfio-pci", "iavf", "iavf"}

// bookNode is a device ledger of a virtual node, as the agent has it:
// kubelet's PodResources at socket (served or not), the fences in
// fenceDir; each change of the ledger hands the manager, once set, its
// layouts again, as the agent does.
type bookNode struct {
	book     *ledger.Book
	socket   string
	fenceDir string
	mgr      atomic.Pointer[vflayout.Manager]
	layouts  atomic.Pointer[[]pools.PFLayout]
	// onChange, if set, is called at each change before the manager.
	onChange func()
}

func newBookNode(t *testing.T, n *virtualnode.Node, fenceDir string) *bookNode {
	t.Helper()
	b := &bookNode{socket: filepath.Join(t.TempDir(), "kubelet.sock"), fenceDir: fenceDir}
	b.book = ledger.NewBook(ledger.BookOptions{Sources: ledger.Sources{PodResourcesSocket: b.socket},
		SysfsRoot: n.SysRoot(), FenceDir: fenceDir, Changed: b.changed})
	b.book.Judge(ledger.Verdicts{})
	t.Cleanup(b.book.Close)
	return b
}

func (b *bookNode) changed() {
	if b.onChange != nil {
		b.onChange()
	}
	if m, l := b.mgr.Load(), b.layouts.Load(); m != nil && l != nil {
		m.Update(*l)
	}
}

// serveKubelet starts kubelet's PodResources.
func (b *bookNode) serveKubelet(t *testing.T) *testkubelet.PodResources {
	t.Helper()
	k, err := testkubelet.ServePodResources(b.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// start runs a manager on the node's sysfs until the test ends and hands
// it layouts.
func (b *bookNode) start(t *testing.T, sys vflayout.Sysfs, o vflayout.Options, layouts []pools.PFLayout) *vflayout.Manager {
	t.Helper()
	o.Sysfs, o.Book = sys, b.book
	mgr := vflayout.New(o)
	go mgr.Run(t.Context())
	b.layouts.Store(&layouts)
	b.mgr.Store(mgr)
	mgr.Update(layouts)
	return mgr
}

// layoutFence is the PF's layout fence in force, if any.
func (b *bookNode) layoutFence() (ledger.Fence, bool) {
	for _, f := range b.book.Snapshot().Fences() {
		if f.Key == vflayout.FenceKeyPrefix+pf {
			return f, true
		}
	}
	return ledger.Fence{}, false
}

// lastLayoutChange keeps, at each change of the Book, the layout change
// the PF's fence records, and returns a reader of the last kept.
func (b *bookNode) lastLayoutChange() func() *fenceapi.LayoutChange {
	var mu sync.Mutex
	var last *fenceapi.LayoutChange
	b.onChange = func() {
		if f, ok := b.layoutFence(); ok {
			mu.Lock()
			last = f.Layout
			mu.Unlock()
		}
	}
	return func() *fenceapi.LayoutChange {
		mu.Lock()
		defer mu.Unlock()
		return last
	}
}

// fenceFiles are the files in the fence directory.
func (b *bookNode) fenceFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(b.fenceDir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestManagerFencesThePF: the change takes the PF's fence before its
// first write, which the ledger refuses while a source of holders cannot
// be read (kubelet not up) and while a pod holds a port ("addr:pN", as
// mlx4 IDs them) of one of its VFs: the layout waits and says why (the
// log, Waiting, the metric) and nothing changes. Once the VFs are free
// the fence is taken, with the change recorded on disk, while the VFs are
// still as they were, the front ends list them withdrawn before the first
// write, and the fence is lifted once the layout is applied.
func TestManagerFencesThePF(t *testing.T) {
	n, sys := newNode(t)
	b := newBookNode(t, n, t.TempDir())
	var fencedWith atomic.Pointer[[]string]
	b.onChange = func() {
		if _, ok := b.layoutFence(); ok && fencedWith.Load() == nil {
			d := drivers(n)
			fencedWith.Store(&d)
		}
	}
	// What the front ends are asked to list: the fence, with the VFs as
	// they were.
	var withdrawnWith atomic.Pointer[[]string]
	withdrawn := func(context.Context) {
		if _, ok := b.layoutFence(); ok {
			d := drivers(n)
			withdrawnWith.Store(&d)
		}
	}
	m, logs := metrics.New(), &logtest.Buffer{}
	var nudged atomicFlag
	mgr := b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Metrics: m, Waiting: nudged.set, Withdrawn: withdrawn}, dpdkLayout)
	orig := drivers(n)

	waitFor(t, "the layout waits for the ledger", func() bool {
		return mgr.Waiting() && nudged.get() && strings.Contains(scrape(m), `hwnet_vf_layout_waiting{pf="0000:3b:00.0"} 1`) &&
			logs.Contains(`msg="VF layout waits" pf=0000:3b:00.0 layout=dpdk why="device 0000:3b:00.0: who holds it is unknown`)
	})
	kubelet := b.serveKubelet(t)
	kubelet.SetPod("default", "holder", "intel.com/x", "0000:3b:01.3:p1")
	b.book.Refresh(t.Context())
	waitFor(t, "the layout waits for the holder of a VF's port", func() bool {
		return logs.Contains(`why="device 0000:3b:01.3:p1 is held by pod default/holder (container main, intel.com/x)"`)
	})
	if got := drivers(n); !equal(got, orig) {
		t.Fatalf("VFs changed while unknown or held: %q", got)
	}

	kubelet.SetPod("default", "holder", "intel.com/x")
	b.book.Refresh(t.Context())
	waitFor(t, "the layout applied once its VFs are free, and its fence lifted", func() bool {
		_, fenced := b.layoutFence()
		return equal(drivers(n), dpdkDrivers) && !mgr.Waiting() && !fenced && len(b.fenceFiles(t)) == 0 &&
			strings.Contains(scrape(m), `hwnet_vf_layout_changes_total{pf="0000:3b:00.0",result="applied"} 1`)
	})
	if got := fencedWith.Load(); got == nil || !equal(*got, orig) {
		t.Errorf("the PF was fenced with its VFs on %v, want before the first write (%q)", got, orig)
	}
	if got := withdrawnWith.Load(); got == nil || !equal(*got, orig) {
		t.Errorf("the front ends were asked to withdraw the VFs with them on %v, want under the fence and before the first write (%q)", got, orig)
	}
}

// TestManagerUnfencedWritesNothing: a fence the ledger cannot keep on
// disk (no fence directory) fails the change before any write: an agent
// dying half way would leave no trace of it.
func TestManagerUnfencedWritesNothing(t *testing.T) {
	n, sys := newNode(t)
	b := newBookNode(t, n, "")
	b.serveKubelet(t)
	if err := b.book.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	orig := drivers(n)
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil))}, dpdkLayout)
	waitFor(t, "the change failed", func() bool {
		return logs.Contains(`msg="VF layout not applied: the PF cannot be fenced" pf=0000:3b:00.0 layout=dpdk retryIn=30s err=`)
	})
	if got := drivers(n); !equal(got, orig) {
		t.Errorf("VFs changed without a fence: %q", got)
	}
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

// TestManagerUnfitLayout: a layout asking the PF for more VFs than its
// sriov_totalvfs is not tried: a VFLayoutInvalid Node Event names the PF,
// the count asked and sriov_totalvfs, the log says it, and nothing is
// fenced or written.
func TestManagerUnfitLayout(t *testing.T) {
	api := kubeapi.Start(t)
	n, sys := newNode(t)
	b := newBookNode(t, n, t.TempDir())
	b.serveKubelet(t)
	if err := b.book.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	var fenced atomicFlag
	b.onChange = func() {
		if _, ok := b.layoutFence(); ok {
			fenced.set()
		}
	}
	logs, orig := &logtest.Buffer{}, drivers(n)
	many := []pools.PFLayout{{PF: pf, PFName: "enp59s0f0", TotalVFs: 256, Layout: &pools.VFLayout{Name: "many", NumVFs: 300}}}
	mgr := b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil)),
		Events: events.Start(t.Context(), api.Client(), "node-1")}, many)

	kubeapi.WaitNodeEvent(t, api.Client(), "node-1", events.ReasonVFLayoutInvalid,
		`VF layout many cannot apply to PF enp59s0f0 (0000:3b:00.0): vfLayouts[0] "many": numVfs 300 is more than PF 0000:3b:00.0 has (sriov_totalvfs 256)`)
	if !logs.Contains(`msg="VF layout cannot apply" pf=0000:3b:00.0 layout=many why=`) {
		t.Errorf("not logged:\n%s", logs)
	}
	if got := drivers(n); !equal(got, orig) || fenced.get() || mgr.Waiting() {
		t.Errorf("VFs %q (want %q), fenced %t, waiting %t: the layout was tried", got, orig, fenced.get(), mgr.Waiting())
	}
}

// TestManagerRetriesAFailedLayout: a layout that failed (its fence cannot
// be kept on disk: a file stands where the fence directory goes) is not
// tried again at every change of the ledger, but after FirstRetry, then
// twice as long: once the fault is gone, the retry applies it without a
// change of configuration.
func TestManagerRetriesAFailedLayout(t *testing.T) {
	n, sys := newNode(t)
	fenceDir := filepath.Join(t.TempDir(), "fences")
	b := newBookNode(t, n, fenceDir)
	b.serveKubelet(t)
	if err := b.book.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fenceDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	logs, orig := &logtest.Buffer{}, drivers(n)
	clk := clocktesting.NewFakeClock(time.Now())
	mgr := b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Clock: clk}, dpdkLayout)
	const notFenced = `msg="VF layout not applied: the PF cannot be fenced" pf=0000:3b:00.0 layout=dpdk`
	waitFor(t, "the first failure", func() bool { return logs.Contains(notFenced + " retryIn=30s") })
	waitFor(t, "the retry timer", clk.HasWaiters)
	clk.Step(vflayout.FirstRetry)
	waitFor(t, "the retry, failing again, and its longer wait", func() bool { return logs.Contains(notFenced + " retryIn=1m0s") })

	if err := os.Remove(fenceDir); err != nil {
		t.Fatal(err)
	}
	// An unfit layout of another PF marks that the manager has taken
	// this update: the failed layout, not due, must not be tried by it.
	unfit := pools.PFLayout{PF: "0000:3b:00.1", TotalVFs: 8, Layout: &pools.VFLayout{Name: "marker", NumVFs: 9}}
	mgr.Update(append(slices.Clone(dpdkLayout), unfit))
	waitFor(t, "the update taken", func() bool { return logs.Contains(`msg="VF layout cannot apply" pf=0000:3b:00.1 layout=marker`) })
	if got := drivers(n); !equal(got, orig) {
		t.Fatalf("the failed layout was tried again before its retry was due: VFs %q", got)
	}
	waitFor(t, "the retry timer", clk.HasWaiters)
	clk.Step(2 * vflayout.FirstRetry)
	waitFor(t, "the layout applied by its retry", func() bool {
		_, fenced := b.layoutFence()
		return equal(drivers(n), dpdkDrivers) && !fenced
	})
}

// TestManagerCountsRebound (issue 44): a VF a DRA claim has bound to
// vfio-pci counts as on the driver it rests on: the PF's layout is met
// and the manager neither waits nor writes; without that record the same
// VF is a change to make, which waits for the ledger.
func TestManagerCountsRebound(t *testing.T) {
	const vf0 = "0000:3b:01.0"
	layout := []pools.PFLayout{{PF: pf, PFName: "enp59s0f0", TotalVFs: 256, Layout: &pools.VFLayout{Name: "as-built", NumVFs: 8,
		Drivers: []pools.VFDriver{{VFs: []pools.IndexRange{{First: 6, Last: 7}}, Driver: "vfio-pci"}}}}}
	for _, tc := range []struct {
		name    string
		rebound map[string]pcidriver.Binding
		waits   bool
	}{
		{"rebound for a claim", map[string]pcidriver.Binding{vf0: {Driver: "iavf"}}, false},
		{"no record", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, sys := newNode(t)
			// What a claim's prepare leaves: VF 0 on vfio-pci by override.
			if err := (pcidriver.Sysfs{Root: n.SysRoot(), Settle: sys.Settle}).Rebind(t.Context(), vf0, "iavf", "vfio-pci"); err != nil {
				t.Fatal(err)
			}
			b := newBookNode(t, n, t.TempDir())
			logs := &logtest.Buffer{}
			var asked atomic.Int32
			rebound := func() map[string]pcidriver.Binding { asked.Add(1); return tc.rebound }
			mgr := b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Metrics: metrics.New(), Rebound: rebound}, layout)
			// One goroutine reconciles: once a later update asks again,
			// the first reconcile is done.
			waitFor(t, "a first reconcile", func() bool { return asked.Load() >= 1 })
			mgr.Update(layout)
			waitFor(t, "a second reconcile", func() bool { return asked.Load() >= 2 })
			if tc.waits {
				waitFor(t, "the layout waits for the ledger", func() bool { return mgr.Waiting() })
				return
			}
			if mgr.Waiting() || logs.Contains("VF layout waits") {
				t.Errorf("the manager waits on a VF a claim rebound: %s", logs)
			}
			if f, _ := n.Device(vf0); f.Driver != "vfio-pci" {
				t.Errorf("VF 0 on %q, want left on vfio-pci for its claim", f.Driver)
			}
		})
	}
}
