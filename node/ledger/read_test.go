package ledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/wakeup"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// newSources serves a test kubelet's PodResources in a temporary directory
// and returns it with the ledger's sources there: its socket, a
// device-info directory and the DRA checkpoint's path (no file yet).
func newSources(tb testing.TB) (*testkubelet.PodResources, ledger.Sources) {
	tb.Helper()
	dir := tb.TempDir()
	socket := filepath.Join(dir, "kubelet.sock")
	kubelet, err := testkubelet.ServePodResources(socket)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(kubelet.Close)
	return kubelet, ledger.Sources{PodResourcesSocket: socket, DevinfoDir: filepath.Join(dir, "devinfo"),
		Checkpoint: filepath.Join(dir, "checkpoint.json")}
}

// TestReadPodsAndClaims: the ledger names kubelet's device plugin
// allocations (since their device-info file was written) and the claims of
// the DRA checkpoint (since they were prepared); when kubelet stops
// answering, its source is unknown and its last holders stay.
func TestReadPodsAndClaims(t *testing.T) {
	kubelet, src := newSources(t)
	kubelet.SetPod("ns", "cnf", "intel.com/vf", "0000:3b:02.0")
	if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", "0000:3b:02.0", devinfo.NewPCI(devinfo.PCI{PCIAddress: "0000:3b:02.0"})); err != nil {
		t.Fatal(err)
	}
	prepared := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	cp := checkpoint.New()
	cp.Claims["uid-c"] = &checkpoint.Claim{Namespace: "ns", Name: "claim", Pods: []string{"uid-p"}, Prepared: prepared,
		Devices: []checkpoint.Device{{Device: "pci-0000-3b-02-1", Resource: "intel.com/vf", PCIAddress: "0000:3b:02.1"}}}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src.Checkpoint, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := ledger.NewReader(src)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := r.Read(ctx)
	if !l.Complete() {
		t.Fatalf("ledger incomplete: %v", l.Unknown)
	}
	pod := l.Holders("0000:3b:02.0")
	if len(pod) != 1 || pod[0].Kind != ledger.Pod || pod[0].Name != "cnf" || pod[0].Container != "main" || pod[0].Since.IsZero() {
		t.Errorf("holders of the allocated VF %+v, want pod ns/cnf container main with a time", pod)
	}
	claim := l.Holders("0000:3b:02.1")
	if len(claim) != 1 || claim[0].Kind != ledger.Claim || claim[0].Name != "claim" || !claim[0].Since.Equal(prepared) {
		t.Errorf("holders of the claimed VF %+v, want claim ns/claim since %v", claim, prepared)
	}
	if hs := l.Holders("0000:3b:02.2"); len(hs) != 0 {
		t.Errorf("free VF held by %+v", hs)
	}
	kubelet.Close()
	// A read waits for a restarting kubelet as long as its context lets it.
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	stale := r.Read(short)
	if stale.Complete() || len(stale.Holders("0000:3b:02.0")) != 1 || stale.Held() != nil {
		t.Errorf("with kubelet gone: unknown %v, holders %+v, held %v; want the source unknown, its last holders kept and no held set",
			stale.Unknown, stale.Holders("0000:3b:02.0"), stale.Held())
	}
}

// TestPollAsksKubeletOnlyWhenNeeded: between full reads, a poll asks
// kubelet only when urgent, when a cheap source changed within the last
// 10 s (a device-info file written by Allocate) or when its last answer is
// 30 s old; else that answer stands.
func TestPollAsksKubeletOnlyWhenNeeded(t *testing.T) {
	kubelet, src := newSources(t)
	r, t0, now := clockedReader(t, src)
	const vf = "0000:3b:02.0"
	allocate := func() { kubelet.SetPod("ns", "cnf", "intel.com/vf", vf) }
	release := func() { kubelet.SetPod("ns", "cnf", "intel.com/vf") }
	writeFile := func() {
		release()
		if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", "0000:3b:02.7", devinfo.NewPCI(devinfo.PCI{PCIAddress: "0000:3b:02.7"})); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		name   string
		at     time.Duration
		change func()
		urgent bool
		held   bool
	}{
		{"first poll asks", 0, func() {}, false, false},
		{"an allocation unseen while nothing changed", 15 * time.Second, allocate, false, false},
		{"urgent asks", 16 * time.Second, func() {}, true, true},
		{"a device-info file written: asks", 17 * time.Second, writeFile, false, false},
		{"settled, answer fresh: unseen", 40 * time.Second, allocate, false, false},
		{"answer 30 s old: asks", 48 * time.Second, func() {}, false, true},
	} {
		*now = t0.Add(s.at)
		s.change()
		l := r.Poll(t.Context(), s.urgent)
		if got := len(l.Holders(vf)) > 0; got != s.held {
			t.Errorf("%s: held %t, want %t", s.name, got, s.held)
		}
	}
}

// TestPollAsksKubeletLessWhereEndsAreTold: where the node's pods cache
// tells the Book of each pod's end (Sources.PodEndsTold), an idle poll
// lets kubelet's answer grow 10 minutes old, not 30 s, while the cache
// holds every pod the answer names running; a pod it does not (one that
// ended before the cache started, of which no end was told) has kubelet
// asked every 30 s, and so does a cache that does not run.
func TestPollAsksKubeletLessWhereEndsAreTold(t *testing.T) {
	kubelet, src := newSources(t)
	cache := &podsCache{}
	cache.set("ns", "cnf", "", true)
	told := true
	src.PodRunning, src.PodEndsTold = cache.Running, func() bool { return told }
	r, t0, now := clockedReader(t, src)
	const vf, vf2, vf3 = "0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.2"
	const stale = 10 * time.Minute
	for _, s := range []struct {
		name   string
		at     time.Duration
		change func()
		urgent bool
		held   []string
	}{
		{"first poll asks", 0, func() { kubelet.SetPod("ns", "cnf", "intel.com/vf", vf) }, false, []string{vf}},
		{"answer 30 s old: stands", 30 * time.Second, func() { kubelet.SetPod("ns", "cnf", "intel.com/vf", vf, vf2) }, false, []string{vf}},
		{"answer 9 min old: stands", stale - time.Minute, func() {}, false, []string{vf}},
		{"answer 10 min old: asks", stale, func() {}, false, []string{vf, vf2}},
		{"a pod the cache does not hold", stale + time.Second, func() { kubelet.SetPod("ns", "old", "intel.com/vf", vf3) }, true, []string{vf, vf2, vf3}},
		{"its answer 30 s old: asks", stale + 31*time.Second, func() { kubelet.SetPod("ns", "old", "intel.com/vf") }, false, []string{vf, vf2}},
		{"the cache stopped, answer 30 s old: asks", stale + time.Minute + time.Second, func() { told = false; kubelet.SetPod("ns", "cnf", "intel.com/vf", vf, vf2, vf3) }, false, []string{vf, vf2, vf3}},
	} {
		*now = t0.Add(s.at)
		s.change()
		l := r.Poll(t.Context(), s.urgent)
		var held []string
		for _, d := range []string{vf, vf2, vf3} {
			if len(l.Holders(d)) > 0 {
				held = append(held, d)
			}
		}
		if !slices.Equal(held, s.held) {
			t.Errorf("%s: held %v, want %v", s.name, held, s.held)
		}
	}
}

// clockedReader is a Reader of src whose clock reads *now, which starts
// at t0; the test moves it.
func clockedReader(t *testing.T, src ledger.Sources) (*ledger.Reader, time.Time, *time.Time) {
	r := ledger.NewReader(src)
	t.Cleanup(r.Close)
	t0 := time.Now()
	now := t0
	ledger.SetClock(r, func() time.Time { return now })
	return r, t0, &now
}

// TestWatchNudged: an idle watch polls only every 30 s, so a nudge (an
// Allocate that wrote its device-info file, which kubelet then recorded)
// has it poll at once and see the new hold.
func TestWatchNudged(t *testing.T) {
	w := startNudgedWatch(t, 10*time.Millisecond)
	if l := <-w.seen; len(l.Devices()) != 0 {
		t.Fatalf("first ledger holds %v, want nothing", l.Devices())
	}
	const vf = "0000:3b:02.0"
	w.write(t, vf)
	w.kubelet.SetPod("ns", "cnf", "intel.com/vf", vf)
	w.nudge.Send()
	w.waitHeld(t, vf, "the nudged watch never saw the pod's hold")
}

// nudgedWatch is a watch of fresh sources, nudged by the test.
type nudgedWatch struct {
	ctx     context.Context
	kubelet *testkubelet.PodResources
	src     ledger.Sources
	nudge   *wakeup.Signal
	// seen has the latest ledger the watch applied.
	seen chan *ledger.Ledger
}

// startNudgedWatch starts a watch that polls every interval unless
// nudged, until the test ends or 20 s passed.
func startNudgedWatch(t *testing.T, interval time.Duration) *nudgedWatch {
	kubelet, src := newSources(t)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	w := &nudgedWatch{ctx: ctx, kubelet: kubelet, src: src, nudge: wakeup.New(), seen: make(chan *ledger.Ledger, 1)}
	o := ledger.WatchOptions{Interval: interval, Urgent: func() bool { return false }, Nudge: w.nudge}
	go ledger.NewReader(src).Watch(ctx, o, func(_ context.Context, l *ledger.Ledger) {
		select {
		case <-w.seen:
		default:
		}
		w.seen <- l
	})
	return w
}

// write writes a device-info file for vf.
func (w *nudgedWatch) write(t *testing.T, vf string) {
	t.Helper()
	if err := devinfo.Write(w.src.DevinfoDir, "intel.com/vf", vf, devinfo.NewPCI(devinfo.PCI{PCIAddress: vf})); err != nil {
		t.Fatal(err)
	}
}

// waitHeld waits until the watch applied a ledger in which vf has a
// holder; failure says why not.
func (w *nudgedWatch) waitHeld(t *testing.T, vf, failure string) {
	t.Helper()
	for {
		select {
		case l := <-w.seen:
			if len(l.Holders(vf)) == 1 {
				return
			}
		case <-w.ctx.Done():
			t.Fatal(failure)
		}
	}
}

// TestWatchSeesSourcesChange: a source another process changes sends the
// agent nothing, and an idle watch polls only when kubelet's answer goes
// stale (minutes), so it follows the sources' directories: a device-info
// file written, a checkpoint in a driver's directory made after the watch
// began, and one replaced as a driver saves it (a hidden temporary
// renamed over it, whose own events the watch leaves out), are each read
// without a nudge.
func TestWatchSeesSourcesChange(t *testing.T) {
	const vf, claimed = "0000:3b:02.0", "0000:3b:02.1"
	claim := func() *checkpoint.Checkpoint {
		cp := checkpoint.New()
		cp.Claims["uid-c"] = &checkpoint.Claim{Namespace: "ns", Name: "claim", Pods: []string{"uid-p"}, Prepared: time.Now(),
			Devices: []checkpoint.Device{{Device: "pci-0000-3b-02-1", Resource: "intel.com/vf", PCIAddress: claimed}}}
		return cp
	}
	for _, tc := range []struct {
		name string
		// before runs before the watch begins.
		before func(t *testing.T, src ledger.Sources)
		change func(t *testing.T, kubelet *testkubelet.PodResources, src ledger.Sources)
		device string
	}{
		{"device-info file", nil, func(t *testing.T, kubelet *testkubelet.PodResources, src ledger.Sources) {
			kubelet.SetPod("ns", "cnf", "intel.com/vf", vf)
			if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", vf, devinfo.NewPCI(devinfo.PCI{PCIAddress: vf})); err != nil {
				t.Fatal(err)
			}
		}, vf},
		{"a new driver's checkpoint", nil, func(t *testing.T, _ *testkubelet.PodResources, src ledger.Sources) {
			writeCheckpoint(t, filepath.Join(src.PluginsDir, "new.hwnet.io"), claim())
		}, claimed},
		{"a driver's checkpoint replaced", func(t *testing.T, src ledger.Sources) {
			writeCheckpoint(t, filepath.Join(src.PluginsDir, "old.hwnet.io"), checkpoint.New())
		}, func(t *testing.T, _ *testkubelet.PodResources, src ledger.Sources) {
			data, err := checkpoint.Encode(claim())
			if err != nil {
				t.Fatal(err)
			}
			if err := atomicfile.Write(filepath.Join(src.PluginsDir, "old.hwnet.io", "checkpoint.json"), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, claimed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubelet, src := newSources(t)
			src.PluginsDir = t.TempDir()
			if tc.before != nil {
				tc.before(t, src)
			}
			r := ledger.NewReader(src)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			seen := make(chan *ledger.Ledger, 16)
			done := make(chan struct{})
			go func() {
				defer close(done)
				r.Watch(ctx, ledger.WatchOptions{Interval: time.Hour, Urgent: func() bool { return false }},
					func(ctx context.Context, l *ledger.Ledger) {
						select {
						case seen <- l:
						case <-ctx.Done():
						}
					})
			}()
			defer func() { cancel(); <-done }()
			// Two polls: the first (at once) and the one the source
			// watch asks for once it watches; a change before then is
			// read without any event.
			<-seen
			<-seen
			tc.change(t, kubelet, src)
			for {
				select {
				case l := <-seen:
					if len(l.Holders(tc.device)) == 1 {
						return
					}
				case <-ctx.Done():
					t.Fatalf("the idle watch never read the hold of %s", tc.device)
				}
			}
		})
	}
}

// TestWatchNudgeBurst: every hand-out nudges the watch; a burst of them
// (kubelet admitting a hundred pods) is read once per gap, not once per
// hand-out, and what the last one changed is still read.
func TestWatchNudgeBurst(t *testing.T) {
	kubelet, src := newSources(t)
	r := ledger.NewReader(src)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	nudge := wakeup.New()
	var polls atomic.Int32
	seen := make(chan *ledger.Ledger, 1)
	go r.Watch(ctx, ledger.WatchOptions{Interval: time.Hour, Urgent: func() bool { return false }, Nudge: nudge},
		func(_ context.Context, l *ledger.Ledger) {
			polls.Add(1)
			select {
			case <-seen:
			default:
			}
			seen <- l
		})
	<-seen
	start := time.Now()
	const vf = "0000:3b:02.0"
	for i := range 200 {
		if i == 199 {
			kubelet.SetPod("ns", "cnf", "intel.com/vf", vf)
			if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", vf, devinfo.NewPCI(devinfo.PCI{PCIAddress: vf})); err != nil {
				t.Fatal(err)
			}
		}
		nudge.Send()
	}
	burst := time.Since(start)
	for read := false; !read; {
		select {
		case l := <-seen:
			read = len(l.Holders(vf)) == 1
		case <-ctx.Done():
			t.Fatal("the watch never read what the burst's last nudge changed")
		}
	}
	// The first nudge is read at once, then one read per gap at most.
	if n, most := polls.Load()-1, int32(burst/ledger.NudgeGap)+2; n > most {
		t.Fatalf("a burst of 200 nudges in %v made %d polls, want at most %d", burst, n, most)
	}
}

// TestWatchNudgesAndChangesInterleaved: nudges and changes of the
// sources' directories come in random interleavings, and the watch holds
// its nudge while a poll is scheduled, dropping the nudges meanwhile:
// after every round, its last change is read, well before the idle
// watch's next poll (30 s).
func TestWatchNudgesAndChangesInterleaved(t *testing.T) {
	w := startNudgedWatch(t, time.Hour)
	<-w.seen
	for round := range 30 {
		for range 5 + rand.IntN(30) {
			if rand.IntN(2) == 0 {
				w.nudge.Send()
			} else {
				w.write(t, fmt.Sprintf("0000:5e:%02x.%d", rand.IntN(32), rand.IntN(8)))
			}
			if rand.IntN(3) == 0 {
				runtime.Gosched()
			}
		}
		vf := fmt.Sprintf("0000:3b:%02x.0", round+2)
		w.kubelet.SetPod("ns", "cnf", "intel.com/vf", vf)
		w.write(t, vf)
		w.nudge.Send()
		w.waitHeld(t, vf, fmt.Sprintf("round %d: the watch never read the round's last change", round))
	}
}

// TestPodHoldersByUID: kubelet names pods without their UID; the pods'
// cache gives it, so that a pod recreated under the same name is told
// from the old one.
func TestPodHoldersByUID(t *testing.T) {
	kubelet, src := newSources(t)
	kubelet.SetPod("ns", "web-0", "intel.com/vf", "0000:3b:02.0")
	src.PodUID = func(namespace, name string) string {
		if namespace == "ns" && name == "web-0" {
			return "uid-new"
		}
		return ""
	}
	r := ledger.NewReader(src)
	defer r.Close()
	hs := r.Read(t.Context()).Holders("0000:3b:02.0")
	if len(hs) != 1 || len(hs[0].PodUIDs) != 1 || hs[0].PodUIDs[0] != "uid-new" {
		t.Errorf("holders %+v, want pod ns/web-0 with uid-new", hs)
	}
}

// TestStartingKubeletReleasesNothing: a kubelet that (re)starts serves
// PodResources before it has loaded its pods, and answers without them.
// A pod it omits keeps its devices while the node's pods cache says it
// runs, and lets them go once the cache says it ended; without the cache,
// for 30 s after kubelet started.
func TestStartingKubeletReleasesNothing(t *testing.T) {
	const vf = "0000:3b:02.0"
	for _, tc := range []struct {
		name    string
		running func(ns, name, uid string) bool
		after   time.Duration
		held    bool
	}{
		{"the cache says it runs", func(string, string, string) bool { return true }, time.Minute, true},
		{"the cache says it ended", func(string, string, string) bool { return false }, 0, false},
		{"no cache, kubelet just started", nil, time.Second, true},
		{"no cache, kubelet up 30 s", nil, 31 * time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kubelet, src := newSources(t)
			src.PodRunning = tc.running
			kubelet.SetPod("ns", "cnf", "intel.com/vf", vf)
			r := ledger.NewReader(src)
			defer r.Close()
			now := time.Now()
			ledger.SetClock(r, func() time.Time { return now })
			if hs := r.Read(t.Context()).Holders(vf); len(hs) != 1 {
				t.Fatalf("before the restart: holders %+v", hs)
			}
			// kubelet restarts: a new socket, no pod loaded yet.
			kubelet.Close()
			restarted, err := testkubelet.ServePodResources(src.PodResourcesSocket)
			if err != nil {
				t.Fatal(err)
			}
			defer restarted.Close()
			r.Read(t.Context())
			now = now.Add(tc.after)
			l := r.Read(t.Context())
			if !l.Complete() {
				t.Fatalf("unknown: %v", l.Unknown)
			}
			if got := len(l.Holders(vf)) == 1; got != tc.held {
				t.Errorf("held %t, want %t (holders %+v)", got, tc.held, l.Holders(vf))
			}
		})
	}
}

// TestStartedWithKubelet: an agent that starts while kubelet does has no
// earlier answer to keep the holds of pods a starting kubelet leaves out:
// kubelet is unknown until it has run KubeletSettle (its socket's time),
// and a pending allocation is not dropped while kubelet starts.
func TestStartedWithKubelet(t *testing.T) {
	const vf = "0000:3b:02.0"
	kubelet, src := newSources(t)
	src.Checkpoint, src.KubeletSettle = "", 30*time.Second
	now := time.Now()
	if err := os.Chtimes(src.PodResourcesSocket, now, now); err != nil {
		t.Fatal(err)
	}
	b := ledger.NewBook(ledger.BookOptions{Sources: src})
	b.Judge(ledger.Verdicts{})
	ledger.SetBookClock(b, func() time.Time { return now })
	if err := b.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if why := b.Snapshot().UnknownWhy(); !strings.Contains(why, "kubelet started at "+now.UTC().Format(time.RFC3339)) {
		t.Fatalf("unknown %q, want kubelet starting named", why)
	}
	// The same wait reads the same at every poll (logged once).
	first := b.Snapshot().UnknownWhy()
	now = now.Add(5 * time.Second)
	if why := b.Refresh(t.Context()).UnknownWhy(); why != first {
		t.Fatalf("5 s later, unknown %q, want it as it read at first: %q", why, first)
	}
	now = now.Add(26 * time.Second)
	if l := b.Refresh(t.Context()); !l.Complete() {
		t.Fatalf("kubelet up 31 s: unknown %v", l.Unknown)
	}
	if err := b.Reserve(t.Context(), ledger.Request{Devices: []string{vf}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	// kubelet restarts before it reports the allocation, and answers
	// without it for longer than an allocation's grace.
	kubelet.Close()
	restarted, err := testkubelet.ServePodResources(src.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	b.Refresh(t.Context())
	now = now.Add(20 * time.Second)
	if hs := b.Refresh(t.Context()).Holders(vf); len(hs) != 1 || !hs[0].Pending() {
		t.Errorf("20 s into kubelet's start: holders %+v, want the pending allocation", hs)
	}
	now = now.Add(11 * time.Second)
	if hs := b.Refresh(t.Context()).Holders(vf); len(hs) != 0 {
		t.Errorf("kubelet up 31 s without the allocation: holders %+v, want none", hs)
	}
}

// TestReadDevinfoTimes: a pod's hold is since its device-info file was
// written; a file written anew for a new allocation gives the new time,
// the others keep theirs, also when the directory changes within the
// kernel's timestamp tick of the last read.
func TestReadDevinfoTimes(t *testing.T) {
	kubelet, src := newSources(t)
	write := func(vf string, at time.Time) {
		t.Helper()
		if err := devinfo.Remove(src.DevinfoDir, "intel.com/vf", vf); err != nil {
			t.Fatal(err)
		}
		if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", vf, devinfo.NewPCI(devinfo.PCI{PCIAddress: vf})); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(filepath.Join(src.DevinfoDir, devinfo.FileName("intel.com/vf", vf)), at, at); err != nil {
			t.Fatal(err)
		}
	}
	first := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	kubelet.SetPod("ns", "a", "intel.com/vf", "0000:3b:02.0")
	kubelet.SetPod("ns", "b", "intel.com/vf", "0000:3b:02.1")
	write("0000:3b:02.0", first)
	write("0000:3b:02.1", first)
	r := ledger.NewReader(src)
	defer r.Close()
	since := func(vf string) time.Time {
		hs := r.Read(t.Context()).Holders(vf)
		if len(hs) != 1 {
			t.Fatalf("holders of %s: %+v, want one pod", vf, hs)
		}
		return hs[0].Since
	}
	if got := since("0000:3b:02.0"); !got.Equal(first) {
		t.Errorf("since %v, want %v", got, first)
	}
	again := first.Add(time.Hour)
	kubelet.SetPod("ns", "a", "intel.com/vf")
	kubelet.SetPod("ns", "c", "intel.com/vf", "0000:3b:02.0")
	write("0000:3b:02.0", again)
	if got := since("0000:3b:02.0"); !got.Equal(again) {
		t.Errorf("written anew for a new allocation: since %v, want %v", got, again)
	}
	if got := since("0000:3b:02.1"); !got.Equal(first) {
		t.Errorf("untouched: since %v, want %v", got, first)
	}
}

// TestKubeletAnswerAgain: a poll whose answer of kubelet names the holds
// the last one did reuses that answer's holders; every step here changes
// what a hold is or whether it stands without changing how many kubelet
// names, and each read must say what a reader without history reads
// (carried pods aside, which only a history keeps).
func TestKubeletAnswerAgain(t *testing.T) {
	const res, vf0, vf1, vf2 = "intel.com/vf", "0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.2"
	kubelet, src := newSources(t)
	uids := map[string]string{"a": "uid-a", "b": "uid-b"}
	// The pods' cache says no pod runs, but for one step: a pod that
	// runs keeps the holds kubelet leaves out.
	running := map[string]bool{}
	src.PodUID = func(_, name string) string { return uids[name] }
	src.PodRunning = func(_, name, _ string) bool { return running[name] }
	r := ledger.NewReader(src)
	defer r.Close()
	check := func(step string, wantOmitted ...string) {
		t.Helper()
		got := r.Read(t.Context())
		fresh := ledger.NewReader(src)
		defer fresh.Close()
		want := fresh.Read(t.Context())
		for _, id := range []string{vf0, vf1, vf2} {
			hs, ws := got.Holders(id), want.Holders(id)
			if holdersString(hs) != holdersString(ws) && !slices.Contains(wantOmitted, id) {
				t.Errorf("%s: %s held by %s, a reader without history reads %s", step, id, holdersString(hs), holdersString(ws))
			}
		}
	}
	kubelet.SetPod("ns", "a", res, vf0, vf1)
	kubelet.SetPod("ns", "b", res, vf2)
	check("first read")
	check("the same answer")
	kubelet.SetPod("ns", "a", res, vf2, vf1)
	kubelet.SetPod("ns", "b", res, vf0)
	check("two pods swap devices")
	uids["a"] = "uid-a2"
	check("a pod recreated under its name")
	if err := devinfo.Write(src.DevinfoDir, res, vf1, devinfo.NewPCI(devinfo.PCI{PCIAddress: vf1})); err != nil {
		t.Fatal(err)
	}
	check("a device-info file written")
	// The same hold twice: two containers of one name, as a pod listed
	// twice would give.
	main := testkubelet.Container{Name: "main", Devices: map[string][]string{res: {vf1}}}
	kubelet.SetContainers("ns", "a", main, main)
	check("a hold named twice, one gone")
	kubelet.SetPod("ns", "a", res, vf2, vf1)
	check("the hold named twice named once again")
	kubelet.SetPod("ns", "b", res)
	running["b"] = true
	// kubelet leaves b out while b still runs: the reader carries its
	// hold, which a reader without history cannot.
	check("a pod left out while it runs", vf0)
	running["b"] = false
	check("the same answer, the pod left out has ended")
}

// holdersString says all of each holder, its pod UIDs and since too.
func holdersString(hs []ledger.Holder) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s uids %v since %v; ", h, h.PodUIDs, h.Since)
	}
	return b.String()
}

// TestFollowedAnswerIsNotReused: a reader that took another reader's
// newer answer of kubelet (as the Book's two do) reads that answer, not
// its own older one, even when kubelet answers it the older holds again.
func TestFollowedAnswerIsNotReused(t *testing.T) {
	const res, vf0, vf1 = "intel.com/vf", "0000:3b:02.0", "0000:3b:02.1"
	kubelet, src := newSources(t)
	kubelet.SetPod("ns", "a", res, vf0)
	b := ledger.NewBook(ledger.BookOptions{Sources: src})
	b.Judge(ledger.Verdicts{})
	if err := b.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := ledger.WatchReader(b)
	defer r.Close()
	ledger.PollWatch(t.Context(), b, r, true)
	kubelet.SetPod("ns", "a", res, vf1)
	b.Refresh(t.Context())
	kubelet.SetPod("ns", "a", res, vf0)
	l := ledger.PollWatch(t.Context(), b, r, true)
	if hs := l.Holders(vf0); len(hs) != 1 || len(l.Holders(vf1)) != 0 {
		t.Errorf("after kubelet moved a back to %s: %s held by %v, %s by %v", vf0, vf0, hs, vf1, l.Holders(vf1))
	}
}

// shownCheckpoint is a DRA driver showing cp as the checkpoint it keeps.
type shownCheckpoint struct{ cp *checkpoint.Checkpoint }

func (s shownCheckpoint) ViewCheckpoint(read func(*checkpoint.Checkpoint)) error {
	read(s.cp)
	return nil
}

// TestReadDriverCheckpoint: the running driver's checkpoint is read as
// the driver shows it once it runs (it keeps the checkpoint it saved),
// the file before; a claim's pods are the ledger's own copy.
func TestReadDriverCheckpoint(t *testing.T) {
	_, src := newSources(t)
	claimOf := func(addr string) *checkpoint.Checkpoint {
		cp := checkpoint.New()
		cp.Claims[types.UID("uid-"+addr)] = &checkpoint.Claim{Namespace: "ns", Name: "claim", Pods: []string{"uid-p"},
			Devices: []checkpoint.Device{{Device: "d", Resource: "intel.com/vf", PCIAddress: addr}}}
		return cp
	}
	data, err := checkpoint.Encode(claimOf("0000:3b:02.1"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src.Checkpoint, data, 0o600); err != nil {
		t.Fatal(err)
	}
	shown := claimOf("0000:3b:02.2")
	var running atomic.Bool
	src.Driver = func() ledger.CheckpointViewer {
		if running.Load() {
			return shownCheckpoint{shown}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tt := range []struct {
		running    bool
		held, free string
	}{{false, "0000:3b:02.1", "0000:3b:02.2"}, {true, "0000:3b:02.2", "0000:3b:02.1"}} {
		running.Store(tt.running)
		r := ledger.NewReader(src)
		l := r.Read(ctx)
		r.Close()
		if hs := l.Holders(tt.held); len(hs) != 1 || len(l.Holders(tt.free)) != 0 {
			t.Errorf("driver running %t: %s held by %+v, %s by %+v; want the first alone held", tt.running, tt.held, hs, tt.free, l.Holders(tt.free))
			continue
		}
		if tt.running {
			shown.Claims[types.UID("uid-"+tt.held)].Pods[0] = "changed"
			if got := l.Holders(tt.held)[0].PodUIDs; got[0] != "uid-p" {
				t.Errorf("the ledger's pods of the claim changed with the driver's: %v", got)
			}
		}
	}
}
