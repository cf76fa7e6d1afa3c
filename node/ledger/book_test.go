package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// Devices of a made-up node: a PF with two VFs, and a PF with one
// (sysfsWithVFs).
const (
	pfA  = "0000:3b:00.0"
	vfA0 = "0000:3b:02.0"
	vfA1 = "0000:3b:02.1"
	pfB  = "0000:3e:00.0"
	vfB0 = "0000:3e:02.0"
)

// sysfsWithVFs is a sysfs tree where each VF's physfn names its PF, as the
// Book reads it for fences.
func sysfsWithVFs(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	devices := filepath.Join(root, "bus/pci/devices")
	for vf, pf := range map[string]string{vfA0: pfA, vfA1: pfA, vfB0: pfB, pfA: "", pfB: ""} {
		if err := os.MkdirAll(filepath.Join(devices, vf), 0o755); err != nil {
			t.Fatal(err)
		}
		if pf != "" {
			if err := os.Symlink("../"+pf, filepath.Join(devices, vf, "physfn")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

func openBook(t testing.TB, o ledger.BookOptions) *ledger.Book {
	t.Helper()
	b := ledger.NewBook(o)
	b.Judge(ledger.Verdicts{})
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

var (
	dpPod     = ledger.Holder{Kind: ledger.Pod, Resource: "intel.com/vf"}
	otherDP   = ledger.Holder{Kind: ledger.Pod, Resource: "intel.com/other"}
	claimC    = ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "c", UID: "uid-c", PodUIDs: []string{"pod-1"}}
	claimD    = ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "d", UID: "uid-d", PodUIDs: []string{"pod-2"}}
	sandbox1  = ledger.Holder{Kind: ledger.Container, Resource: "intel.com/vf", Namespace: "ns", Name: "p1", Container: "sandbox-1", PodUIDs: []string{"pod-1"}}
	sandbox2  = ledger.Holder{Kind: ledger.Container, Namespace: "ns", Name: "p2", Container: "sandbox-2", PodUIDs: []string{"pod-2"}}
	viaClaimC = ledger.Holder{Kind: ledger.Container, Namespace: "ns", Name: "p3", Container: "sandbox-3", PodUIDs: []string{"pod-3"}, UID: "uid-c"}
)

// TestReserveConflicts: one device has one holder. Each front end's own
// hands may overlap where the holder is one (kubelet's allocations of a
// resource, a claim and its pods' attachments); everything else is refused
// with a message naming the device and the holder.
func TestReserveConflicts(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first, now ledger.Holder
		want       string
	}{
		{"the same resource's allocations", dpPod, dpPod, ""},
		{"another resource's allocation", dpPod, otherDP, "device 0000:3b:02.0 is held by an allocation of intel.com/vf kubelet has not reported yet"},
		{"a claim over an allocation", dpPod, claimC, "device 0000:3b:02.0 is held by an allocation of intel.com/vf"},
		{"an allocation over a claim", claimC, dpPod, "device 0000:3b:02.0 is held by claim ns/c"},
		{"a second claim", claimC, claimD, "device 0000:3b:02.0 is held by claim ns/c"},
		{"the same claim again", claimC, claimC, ""},
		{"the claim's pod's attachment", claimC, sandbox1, ""},
		{"another pod's attachment of a claim's device", claimC, sandbox2, "device 0000:3b:02.0 is held by claim ns/c"},
		{"a shared claim's other pod, through the claim", claimC, viaClaimC, ""},
		{"an allocation's attachment", dpPod, sandbox1, ""},
		{"a second sandbox", sandbox1, sandbox2, "device 0000:3b:02.0 is held by container sandbox-1 of pod ns/p1"},
		{"an allocation over a stray sandbox", sandbox1, dpPod, "device 0000:3b:02.0 is held by container sandbox-1 of pod ns/p1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := openBook(t, ledger.BookOptions{})
			ctx := context.Background()
			if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: tc.first}); err != nil {
				t.Fatal(err)
			}
			err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: tc.now})
			wantGrant(t, err, tc.want)
			var c *ledger.Conflict
			if tc.want != "" && (!errors.As(err, &c) || c.Reason != ledger.Held) {
				t.Errorf("error %v is not a Held conflict", err)
			}
		})
	}
}

// wantGrant fails the test unless err is nil for want "", or says want.
func wantGrant(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("Reserve: %v, want it granted", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("Reserve: %v, want %q", err, want)
	}
}

// TestReleaseFreesTheDevice: a released hold is gone at once, for every
// device the holder had.
func TestReleaseFreesTheDevice(t *testing.T) {
	b := openBook(t, ledger.BookOptions{})
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0, vfA1}, Holder: claimC}); err != nil {
		t.Fatal(err)
	}
	b.Release(ctx, ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "c", UID: "uid-c"})
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0, vfA1}, Holder: claimD}); err != nil {
		t.Fatalf("after the release: %v", err)
	}
	if hs := b.Snapshot().Holders(vfA1); len(hs) != 1 || hs[0].Name != "d" {
		t.Errorf("holders of %s %+v, want claim d alone", vfA1, hs)
	}
}

// TestReserveRacesHaveOneWinner: claims reserving one device at once: one
// gets it, every other is refused.
func TestReserveRacesHaveOneWinner(t *testing.T) {
	for round := range 50 {
		b := openBook(t, ledger.BookOptions{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for i := range 8 {
			h := ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "c", UID: string(rune('a' + i))}
			wg.Go(func() {
				if b.Reserve(context.Background(), ledger.Request{Devices: []string{vfA0}, Holder: h}) == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if won != 1 {
			t.Fatalf("round %d: %d claims got the device, want 1", round, won)
		}
	}
}

// TestPendingAllocation: an allocation kubelet has not reported yet holds
// the device against other front ends until kubelet reports the pod, and
// goes once a PodResources answer PendingGrace (10 s unless set) younger
// still does not name it (the pod was refused or is gone).
func TestPendingAllocation(t *testing.T) {
	for _, tt := range []struct {
		name  string
		grace time.Duration
		ends  time.Duration
	}{
		{"default grace", 0, ledger.DefaultPendingGrace},
		{"grace set", 3 * time.Second, 3 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) { testPendingAllocation(t, tt.grace, tt.ends) })
	}
}

// pendingBook is a loaded Book of kubelet's PodResources alone, with the
// grace and its clock at *now, which starts at time.Now.
func pendingBook(t *testing.T, grace time.Duration) (*ledger.Book, *testkubelet.PodResources, *time.Time) {
	t.Helper()
	kubelet, src := newSources(t)
	src.Checkpoint = ""
	now := new(time.Time)
	b := ledger.NewBook(ledger.BookOptions{Sources: src, PendingGrace: grace})
	b.Judge(ledger.Verdicts{})
	ledger.SetBookClock(b, func() time.Time { return *now })
	*now = time.Now()
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, kubelet, now
}

func testPendingAllocation(t *testing.T, grace, ends time.Duration) {
	b, kubelet, now := pendingBook(t, grace)
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0, vfA1}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	start := *now
	kubelet.SetPod("ns", "cnf", "intel.com/vf", vfA0)
	*now = now.Add(ends - time.Millisecond)
	l := b.Refresh(ctx)
	if hs := l.Holders(vfA0); len(hs) != 1 || hs[0].Name != "cnf" {
		t.Errorf("reported allocation: holders %+v, want pod ns/cnf alone", hs)
	}
	if hs := l.Holders(vfA1); len(hs) != 1 || !hs[0].Pending() {
		t.Errorf("unreported allocation after %s: holders %+v, want the pending allocation", now.Sub(start), hs)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA1}, Holder: claimC}); err == nil {
		t.Error("a claim got a device an unreported allocation holds")
	}
	*now = start.Add(ends)
	if hs := b.Refresh(ctx).Holders(vfA1); len(hs) != 0 {
		t.Errorf("unreported allocation after %s: holders %+v, want none", now.Sub(start), hs)
	}
}

// TestPendingAllocationAgain: kubelet allocating a device again for the
// pool (a new pod, after the last allocation went unreported) starts the
// grace anew: a PodResources answer that does not name it yet, made
// sooner than PendingGrace after the new allocation, leaves the device
// held, and a fence that needs it free is refused. The soak's seed
// 103,001,448 had the older allocation's grace end the new one.
func TestPendingAllocationAgain(t *testing.T) {
	const grace = 3 * time.Second
	b, _, now := pendingBook(t, grace)
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(grace + time.Second) // kubelet not asked since: the allocation stands
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatalf("kubelet allocating the device again: %v", err)
	}
	*now = now.Add(time.Millisecond)
	if hs := b.Refresh(ctx).Holders(vfA0); len(hs) != 1 || !hs[0].Pending() {
		t.Errorf("an allocation 1ms old that kubelet does not report yet: holders %+v, want it pending", hs)
	}
	if err := b.Fence(ctx, ledger.Fence{Key: "k", PF: pfA}, true); err == nil {
		t.Error("a fence that needs the PF's VFs free was taken over the new allocation")
	}
}

// TestFailClosed: a source that cannot be read at start holds nothing the
// Book knows of, so every device is unknown: refused, and named so, until
// the source is back, when a Reserve reads it again and goes through.
func TestFailClosed(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "kubelet.sock")
	b := openBook(t, ledger.BookOptions{Sources: ledger.Sources{PodResourcesSocket: socket}})
	ctx := context.Background()
	err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimC})
	var c *ledger.Conflict
	if !errors.As(err, &c) || c.Reason != ledger.Unknown || !strings.Contains(err.Error(), "who holds it is unknown: kubelet PodResources") {
		t.Fatalf("Reserve with kubelet's PodResources unreadable: %v, want an Unknown conflict naming it", err)
	}
	if why := b.Snapshot().UnknownWhy(); why == "" {
		t.Error("the snapshot says every source was read")
	}
	if err := b.Fence(ctx, ledger.Fence{Key: "k", PF: pfA}, true); err == nil {
		t.Error("a fence that needs its devices free was taken with the holders unknown")
	}
	kubelet, err := testkubelet.ServePodResources(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimC}); err != nil {
		t.Fatalf("Reserve with kubelet back: %v", err)
	}
}

// TestFences: a PF's fence covers the PF, its VFs (found through sysfs,
// whatever their addresses) and their ports; one that needs its devices
// free waits for a held VF, a port's hold included; a durable one outlives
// the Book and goes with Unfence.
func TestFences(t *testing.T) {
	sysfs := sysfsWithVFs(t)
	fences := filepath.Join(t.TempDir(), "fences")
	o := ledger.BookOptions{SysfsRoot: sysfs, FenceDir: fences}
	b := openBook(t, o)
	ctx := context.Background()
	port := vfA1 + ":p1"
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{port}, Holder: claimC}); err != nil {
		t.Fatal(err)
	}
	layout := ledger.Fence{Key: "vf-layout/" + pfA, PF: pfA, Reason: "its PF's VF layout is changing",
		Layout: &fenceapi.LayoutChange{Before: []fenceapi.VF{{Driver: "iavf"}, {Driver: "iavf"}}, Target: fenceapi.Layout{NumVFs: 1}}}
	if err := b.Fence(ctx, layout, true); err == nil || !strings.Contains(err.Error(), "device "+port+" is held by claim ns/c") {
		t.Fatalf("Fence with a VF port held: %v, want it refused naming the port and the claim", err)
	}
	b.Release(ctx, claimC)
	if err := b.Fence(ctx, layout, true); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{pfA, vfA0, port} {
		if err := b.Reserve(ctx, ledger.Request{Devices: []string{d}, Holder: claimD}); err == nil || !strings.Contains(err.Error(), "is fenced: its PF's VF layout is changing") {
			t.Errorf("Reserve of %s under its PF's fence: %v, want refused as fenced", d, err)
		}
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfB0}, Holder: claimD}); err != nil {
		t.Errorf("Reserve of another PF's VF: %v", err)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{"0000:3b:09.0"}, Holder: claimD}); err == nil {
		t.Error("a VF whose PF cannot be read was handed out while a PF is fenced")
	}

	again := openBook(t, o)
	if fs := again.Snapshot().Fences(); len(fs) != 1 || fs[0].Key != layout.Key || fs[0].Layout == nil || fs[0].Layout.Target.NumVFs != 1 {
		t.Fatalf("fences after a restart %+v, want the layout's", fs)
	}
	if err := again.Unfence(layout.Key); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(fences); len(entries) != 0 {
		t.Errorf("fence files left after Unfence: %v", entries)
	}
	if err := again.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimD}); err != nil {
		t.Errorf("Reserve after the fence was lifted: %v", err)
	}
}

// TestUnhealthyRefused: a device the agent judged unhealthy is refused,
// whoever asks.
func TestUnhealthyRefused(t *testing.T) {
	b := openBook(t, ledger.BookOptions{})
	b.Judge(ledger.Verdicts{Unhealthy: map[string]string{vfA0: "its netdev is gone"}})
	err := b.Reserve(context.Background(), ledger.Request{Devices: []string{vfA0}, Holder: claimC})
	if err == nil || err.Error() != "device 0000:3b:02.0 is unhealthy: its netdev is gone" {
		t.Fatalf("Reserve of an unhealthy device: %v", err)
	}
}

// TestKubeletAnswerNeverRegresses: each of the Book's two readers (its
// own, and Watch's) reuses its last answer of kubelet between the reads
// that ask it. A read that reuses an answer older than the one the Book
// has must not undo it: an allocation that answer settled would look
// free, and a VF layout would take the VF from its pod. (Found by the
// whole-agent soak, seed 70,000,219.)
func TestKubeletAnswerNeverRegresses(t *testing.T) {
	kubelet, src := newSources(t)
	src.Checkpoint = ""
	b := openBook(t, ledger.BookOptions{Sources: src, SysfsRoot: sysfsWithVFs(t)})
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	kubelet.SetPod("ns", "cnf", "intel.com/vf", vfA0)
	watch := ledger.WatchReader(b)
	defer watch.Close()
	ledger.PollWatch(ctx, b, watch, true)
	// A claim comes and goes: its release reads the files again, and
	// kubelet's answer from the Book's own reader, from before the pod.
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfB0}, Holder: claimC}); err != nil {
		t.Fatal(err)
	}
	b.Release(ctx, claimC)
	if hs := b.Snapshot().Holders(vfA0); len(hs) != 1 || hs[0].Name != "cnf" {
		t.Errorf("holders of %s after the release: %+v, want pod ns/cnf", vfA0, hs)
	}
	err := b.Fence(ctx, ledger.Fence{Key: "vf-layout/" + pfA, PF: pfA, Reason: "its PF's VF layout is changing"}, true)
	if err == nil || !strings.Contains(err.Error(), "is held by pod ns/cnf") {
		t.Fatalf("Fence of the PF whose VF pod ns/cnf holds: %v, want it refused naming the pod", err)
	}
}

// TestWatchReadUnderWayKeepsTheNewerAnswer: Watch's reader reads outside
// the Book's lock; a read of it that reuses kubelet's answer while the
// Book asks kubelet afresh, and is applied after, keeps the Book's newer
// answer.
func TestWatchReadUnderWayKeepsTheNewerAnswer(t *testing.T) {
	kubelet, src := newSources(t)
	src.Checkpoint = ""
	b := openBook(t, ledger.BookOptions{Sources: src})
	now := time.Now()
	ledger.SetBookClock(b, func() time.Time { return now })
	ctx := context.Background()
	watch := ledger.WatchReader(b)
	defer watch.Close()
	ledger.PollWatch(ctx, b, watch, true)
	// Past a poll's settle, not its staleness: Watch's next poll reuses
	// kubelet's answer.
	now = now.Add(11 * time.Second)
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	b.Refresh(ctx)
	ledger.FollowBook(watch, b) // Watch's poll begins...
	kubelet.SetPod("ns", "cnf", "intel.com/vf", vfA0)
	now = now.Add(time.Millisecond)
	b.Refresh(ctx) // ...the Book asks kubelet, which reports the pod...
	now = now.Add(time.Millisecond)
	b.Apply(ctx, watch.Poll(ctx, false)) // ...and Watch's read lands after.
	if hs := b.Snapshot().Holders(vfA0); len(hs) != 1 || hs[0].Name != "cnf" {
		t.Errorf("holders of %s after Watch's read: %+v, want pod ns/cnf", vfA0, hs)
	}
	// Watch's next poll follows the answer the Book kept.
	ledger.FollowBook(watch, b)
	now = now.Add(time.Millisecond)
	b.Apply(ctx, watch.Poll(ctx, false))
	if hs := b.Snapshot().Holders(vfA0); len(hs) != 1 || hs[0].Name != "cnf" {
		t.Errorf("holders of %s after Watch's next read: %+v, want pod ns/cnf", vfA0, hs)
	}
}

// TestWatchReadBegunBeforeTheBooksEndedKeepsWhatItSaw: Watch's reader
// reads outside the Book's lock, so one of its reads can begin after one
// of the Book's, read a checkpoint before the Book's read does, and land
// after it. It must not undo what the Book saw: another driver's
// checkpoint torn in between stays unknown, and nothing is handed out.
func TestWatchReadBegunBeforeTheBooksEndedKeepsWhatItSaw(t *testing.T) {
	_, src := newSources(t)
	src.PluginsDir = t.TempDir()
	b := openBook(t, ledger.BookOptions{Sources: src})
	ctx := context.Background()
	begun := time.Now()
	watch := ledger.WatchReader(b)
	defer watch.Close()
	// Watch's read begins 1 ms into the Book's (which the clocks below
	// make last 2 ms) and finds every checkpoint whole...
	ledger.SetClock(watch, func() time.Time { return begun.Add(time.Millisecond) })
	ledger.FollowBook(watch, b)
	early := watch.Poll(ctx, true)
	if !early.Complete() {
		t.Fatalf("Watch's read before the tear: unknown %v", early.Unknown)
	}
	// ...the other driver's checkpoint is torn...
	dir := filepath.Join(src.PluginsDir, "old.hwnet.io")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.json"), []byte(`{"format": "`+checkpoint.Marker+`", "version": 3, "claims": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	// ...the Book's read, begun first, sees it torn...
	reads := 0
	ledger.SetBookClock(b, func() time.Time {
		reads++
		return begun.Add(time.Duration(min(reads-1, 1)) * 2 * time.Millisecond)
	})
	if l := b.Refresh(ctx); l.Complete() {
		t.Fatal("the Book's read did not see the torn checkpoint")
	}
	// ...and Watch's read lands last.
	b.Apply(ctx, early)
	if b.Snapshot().Complete() {
		t.Error("Watch's earlier look at the checkpoints undid the Book's: the torn one is no longer unknown")
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: sandbox1}); err == nil {
		t.Errorf("%s handed out while another driver's checkpoint is torn", vfA0)
	}
}

// TestMetricsKeepTheNewestSnapshot: a publish reports to the metrics
// after the Book's lock is released, so a report can come after a newer
// publish's; the metrics must still say what the newest snapshot says.
func TestMetricsKeepTheNewestSnapshot(t *testing.T) {
	_, src := newSources(t)
	src.PluginsDir = t.TempDir()
	m := metrics.New()
	b := openBook(t, ledger.BookOptions{Sources: src, Metrics: m})
	ctx := context.Background()
	dir := filepath.Join(src.PluginsDir, "old.hwnet.io")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.json"), []byte(`{"format": "`+checkpoint.Marker+`", "version": 3`), 0o600); err != nil {
		t.Fatal(err)
	}
	if b.Refresh(ctx).Complete() {
		t.Fatal("the torn checkpoint not seen")
	}
	ledger.ReportChanged(b) // the report of the first publish, of the whole checkpoints, comes last
	rec := httptest.NewRecorder()
	m.Handler(false).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "\nhwnet_ledger_unknown_sources 1\n") {
		t.Errorf("hwnet_ledger_unknown_sources is not 1 with a checkpoint torn:\n%s", grepLines(rec.Body.String(), "hwnet_ledger_unknown_sources"))
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestNotJudgedRefused: until the agent has judged the devices' health
// once, none is handed out: a front end serving before it must not hand
// out a device whose PF is down.
func TestNotJudgedRefused(t *testing.T) {
	b := ledger.NewBook(ledger.BookOptions{})
	ctx := context.Background()
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimC})
	var c *ledger.Conflict
	if !errors.As(err, &c) || c.Reason != ledger.Unknown || err.Error() != "device 0000:3b:02.0: its health is not judged yet: the agent is starting" {
		t.Fatalf("Reserve before the first Judge: %v, want an Unknown conflict saying health is not judged", err)
	}
	b.Judge(ledger.Verdicts{})
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimC}); err != nil {
		t.Errorf("Reserve once judged: %v", err)
	}
}

// TestAwayRefused: a device whose netdev is away goes only where a
// sandbox's attachment explains it (the holders decide) or to a holder
// that has it already: never to a new allocation, whatever allocation kubelet has
// not reported, or has let go of, holds it.
func TestAwayRefused(t *testing.T) {
	const away = "is unhealthy: its netdev is away from the node's network namespace and no attachment holds it"
	reported := ledger.Holder{Kind: ledger.Pod, Resource: "intel.com/vf", Namespace: "ns", Name: "cnf"}
	for _, tc := range []struct {
		name  string
		first *ledger.Holder
		now   ledger.Holder
		want  string
	}{
		{"a free device", nil, dpPod, away},
		{"over an allocation kubelet has not reported", &dpPod, dpPod, away},
		{"over a reported allocation", &reported, dpPod, away},
		{"a claim", nil, claimC, away},
		{"the same claim again", &claimC, claimC, ""},
		{"over an allocation's attachment", &sandbox1, dpPod, "is held by container sandbox-1 of pod ns/p1"},
		{"the claim's pod's attachment", &claimC, sandbox1, away},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := openBook(t, ledger.BookOptions{})
			ctx := context.Background()
			if tc.first != nil {
				if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: *tc.first}); err != nil {
					t.Fatal(err)
				}
			}
			b.Judge(ledger.Verdicts{Away: map[string]bool{vfA0: true}})
			err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: tc.now})
			wantGrant(t, err, tc.want)
			if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA1}, Holder: tc.now}); err != nil {
				t.Errorf("Reserve of a device whose netdev is in the node: %v", err)
			}
		})
	}
}

// TestEveryHwnetCheckpoint: the claims of every hwnet checkpoint under
// kubelet's plugins directory hold their devices (a renamed driver's, one
// of an agent with DRA off); another driver's checkpoint.json is none of
// hwnet's business; a torn hwnet checkpoint makes every device unknown.
func TestEveryHwnetCheckpoint(t *testing.T) {
	plugins := t.TempDir()
	old := checkpoint.New()
	old.Claims["uid-old"] = &checkpoint.Claim{Namespace: "ns", Name: "old", Devices: []checkpoint.Device{{PCIAddress: vfA0, CDIDevice: "old.hwnet.io/net=x"}}}
	writeCheckpoint(t, filepath.Join(plugins, "old.hwnet.io"), old)
	foreign := filepath.Join(plugins, "gpu.example.com")
	if err := os.MkdirAll(foreign, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "checkpoint.json"), []byte(`{"checksum": 1, "v1": {"preparedClaims": {}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	b := openBook(t, ledger.BookOptions{Sources: ledger.Sources{PluginsDir: plugins}})
	l := b.Snapshot()
	if !l.Complete() {
		t.Fatalf("unknown: %v", l.Unknown)
	}
	if hs := l.Holders(vfA0); len(hs) != 1 || hs[0].Name != "old" || hs[0].UID != "uid-old" {
		t.Errorf("holders of %s %+v, want the renamed driver's claim", vfA0, hs)
	}
	// Two checkpoints holding devices: each device has the holds of both.
	both := checkpoint.New()
	both.Claims["uid-new"] = &checkpoint.Claim{Namespace: "ns", Name: "new", Devices: []checkpoint.Device{
		{PCIAddress: vfA0, CDIDevice: "new.hwnet.io/net=x"}, {PCIAddress: vfA1, CDIDevice: "new.hwnet.io/net=y"}}}
	writeCheckpoint(t, filepath.Join(plugins, "new.hwnet.io"), both)
	l = b.Refresh(context.Background())
	if hs := l.Holders(vfA0); len(hs) != 2 || hs[0].Name != "new" || hs[1].Name != "old" {
		t.Errorf("holders of %s %+v, want both drivers' claims", vfA0, hs)
	}
	if hs := l.Holders(vfA1); len(hs) != 1 || hs[0].Name != "new" {
		t.Errorf("holders of %s %+v, want the second driver's claim", vfA1, hs)
	}
	if err := os.Remove(filepath.Join(plugins, "new.hwnet.io", "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	if hs := b.Refresh(context.Background()).Holders(vfA0); len(hs) != 1 || hs[0].Name != "old" {
		t.Errorf("holders of %s %+v once the second checkpoint went, want the renamed driver's claim", vfA0, hs)
	}
	torn := filepath.Join(plugins, "torn.hwnet.io")
	if err := os.MkdirAll(torn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(torn, "checkpoint.json"), []byte(`{"format": "`+checkpoint.Marker+`", "version": 3, "claims": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	l = b.Refresh(context.Background())
	if l.Complete() || !strings.Contains(l.UnknownWhy(), "torn.hwnet.io") {
		t.Errorf("with a torn hwnet checkpoint: unknown %q, want it named", l.UnknownWhy())
	}
	fresh := openBook(t, ledger.BookOptions{Sources: ledger.Sources{PluginsDir: plugins}})
	if hs := fresh.Snapshot().Holders(vfA0); len(hs) != 1 || hs[0].Name != "old" {
		t.Errorf("a fresh read beside the torn checkpoint: holders of %s %+v, want the other checkpoint's claim", vfA0, hs)
	}
	unmounted := openBook(t, ledger.BookOptions{Sources: ledger.Sources{PluginsDir: filepath.Join(plugins, "missing")}})
	if why := unmounted.Snapshot().UnknownWhy(); !strings.Contains(why, "missing") {
		t.Errorf("plugins directory missing (not mounted): unknown %q, want it named", why)
	}
}

// TestUnreadableRecordFailsClosed: a CNI record that cannot be read may
// hold any device: the records are unknown until it goes.
func TestUnreadableRecordFailsClosed(t *testing.T) {
	recs := &fakeRecords{unreadable: "abc"}
	b := openBook(t, ledger.BookOptions{Sources: ledger.Sources{Records: recs}})
	if why := b.Snapshot().UnknownWhy(); !strings.Contains(why, "record abc") {
		t.Fatalf("unknown %q, want the record named", why)
	}
	recs.unreadable = ""
	recs.changed = recs.changed.Add(time.Second)
	if l := b.Refresh(context.Background()); !l.Complete() {
		t.Errorf("unknown %v after the record went", l.Unknown)
	}
}

func writeCheckpoint(t testing.TB, dir string, cp *checkpoint.Checkpoint) {
	t.Helper()
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakeRecords are CNI records of which one may be unreadable.
type fakeRecords struct {
	changed    time.Time
	unreadable string
}

func (f *fakeRecords) Changed() (time.Time, error) { return f.changed, nil }

func (f *fakeRecords) RecordsDir() string { return "" }

func (f *fakeRecords) List() ([]string, error) {
	if f.unreadable == "" {
		return nil, nil
	}
	return []string{f.unreadable}, nil
}

func (f *fakeRecords) Load(id string) (*attachmentapi.Record, error) {
	return nil, errors.New("checksum mismatch")
}

func (f *fakeRecords) Modified(string) (time.Time, error) { return f.changed, nil }

// TestWatchPollsWhileUnknown: a poll that finds a source gone has the
// watch poll every interval, not every 30 s, so that hand-outs resume as
// soon as the source is back.
func TestWatchPollsWhileUnknown(t *testing.T) {
	kubelet, src := newSources(t)
	b := openBook(t, ledger.BookOptions{Sources: src})
	ctx := watchBook(t, b)
	kubelet.Close()
	// A device-info file written, as by Allocate: the next poll asks
	// kubelet, and finds it gone.
	if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", vfA0, devinfo.NewPCI(devinfo.PCI{PCIAddress: vfA0})); err != nil {
		t.Fatal(err)
	}
	b.Nudge()
	waitSnapshot(ctx, t, b, "kubelet's PodResources unknown", func(l *ledger.Ledger) bool { return !l.Complete() })
	back, err := testkubelet.ServePodResources(src.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	waitSnapshot(ctx, t, b, "kubelet's PodResources read again", (*ledger.Ledger).Complete)
}

// watchBook runs the Book's watch, polling every 10 ms and when nudged (Nudge),
// until the test ends or 20 s pass, and waits for its first poll.
func watchBook(t *testing.T, b *ledger.Book) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	loaded := b.Snapshot().ReadAt
	go b.Watch(ctx, ledger.WatchOptions{Interval: 10 * time.Millisecond, Urgent: func() bool { return false }})
	waitSnapshot(ctx, t, b, "the watch's first poll", func(l *ledger.Ledger) bool { return l.ReadAt.After(loaded) })
	return ctx
}

// waitSnapshot waits until the Book's snapshot satisfies cond.
func waitSnapshot(ctx context.Context, t *testing.T, b *ledger.Book, what string, cond func(*ledger.Ledger) bool) {
	t.Helper()
	waitFor(ctx, t, what, func() bool { return cond(b.Snapshot()) }, func() string { return fmt.Sprintf("unknown: %v", b.Snapshot().Unknown) })
}

// waitFor waits until cond holds; why says what is the matter if it
// never does.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool, why func() string) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v; %s", what, ctx.Err(), why())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestRecheckAsksKubeletAtOnce: kubelet back from a restart may have let
// pods go while it was down; Recheck has the watch ask it at once, not at
// its next 30 s poll.
func TestRecheckAsksKubeletAtOnce(t *testing.T) {
	kubelet, src := newSources(t)
	kubelet.SetPod("ns", "cnf", "intel.com/vf", vfA0)
	b := openBook(t, ledger.BookOptions{Sources: src})
	ctx := watchBook(t, b)
	kubelet.SetPod("ns", "cnf", "intel.com/vf")
	b.Recheck()
	waitSnapshot(ctx, t, b, "the pod's hold gone", func(l *ledger.Ledger) bool { return len(l.Holders(vfA0)) == 0 })
}

// podsCache is the node's pods cache as the ledger reads it: the pods
// that run, by namespace/name/UID.
type podsCache struct {
	mu      sync.Mutex
	running map[string]bool
}

func (c *podsCache) set(namespace, name, uid string, runs bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running == nil {
		c.running = map[string]bool{}
	}
	c.running[namespace+"/"+name+"/"+uid] = runs
}

func (c *podsCache) Running(namespace, name, uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running[namespace+"/"+name+"/"+uid]
}

func (c *podsCache) UIDOf(namespace, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key := range c.running {
		if strings.HasPrefix(key, namespace+"/"+name+"/") {
			return strings.TrimPrefix(key, namespace+"/"+name+"/")
		}
	}
	return ""
}

// TestWatchAsksKubeletWhenAPodEnds: kubelet says nothing when a pod's
// devices are let go, and an idle watch asks it only every 10 minutes where
// the node's pods cache tells of ends. A pod the cache saw end has the
// watch ask kubelet at once and at every Interval while kubelet still
// names it, so its devices are seen free within an Interval of kubelet
// letting them go.
func TestWatchAsksKubeletWhenAPodEnds(t *testing.T) {
	kubelet, src := newSources(t)
	pods := &podsCache{}
	pods.set("ns", "cnf", "uid-1", true)
	src.PodRunning, src.PodUID, src.PodEndsTold = pods.Running, pods.UIDOf, func() bool { return true }
	kubelet.SetPod("ns", "cnf", "intel.com/vf", vfA0)
	b := openBook(t, ledger.BookOptions{Sources: src})
	ctx := watchBook(t, b)
	pods.set("ns", "cnf", "uid-1", false)
	asked := kubelet.Lists()
	b.PodEnded()
	// kubelet names the ended pod's device a while yet: the watch keeps
	// asking.
	waitFor(ctx, t, "kubelet asked three times", func() bool { return kubelet.Lists() >= asked+3 },
		func() string { return fmt.Sprintf("asked %d times", kubelet.Lists()-asked) })
	if hs := b.Snapshot().Holders(vfA0); len(hs) != 1 {
		t.Fatalf("holders of %s while kubelet names the pod: %+v, want the pod's", vfA0, hs)
	}
	kubelet.SetPod("ns", "cnf", "intel.com/vf")
	waitSnapshot(ctx, t, b, "the ended pod's hold gone", func(l *ledger.Ledger) bool { return len(l.Holders(vfA0)) == 0 })
}

// TestPodEndAwaitedBounded: a pod's end has kubelet asked at every poll
// only while kubelet's answer names a pod the cache says does not run,
// and for at most 10 s after the end: an old kubelet lists an ended pod's
// devices until the pod is deleted.
func TestPodEndAwaitedBounded(t *testing.T) {
	kubelet, src := newSources(t)
	pods := &podsCache{}
	pods.set("ns", "cnf", "uid-1", true)
	pods.set("ns", "web", "uid-2", true)
	src.PodRunning, src.PodUID, src.PodEndsTold = pods.Running, pods.UIDOf, func() bool { return true }
	kubelet.SetPod("ns", "cnf", "intel.com/vf", vfA0)
	b, now := clockedBook(t, src)
	r := ledger.WatchReader(b)
	defer r.Close()
	ctx := t.Context()
	ledger.PollWatch(ctx, b, r, true)
	t0 := *now
	for _, s := range []struct {
		name  string
		at    time.Duration
		step  func()
		await bool
	}{
		{"no pod ended", 0, func() {}, false},
		{"a pod kubelet does not name ended", time.Second, func() { pods.set("ns", "web", "uid-2", false); b.PodEnded() }, false},
		{"the pod kubelet names ended", 2 * time.Second, func() { pods.set("ns", "cnf", "uid-1", false); b.PodEnded() }, true},
		{"kubelet still names it 9 s on", 11 * time.Second, func() {}, true},
		{"10 s after the end", 12 * time.Second, func() {}, false},
		{"it ended again, and kubelet let it go", 13 * time.Second, func() { b.PodEnded(); kubelet.SetPod("ns", "cnf", "intel.com/vf") }, true},
	} {
		*now = t0.Add(s.at)
		s.step()
		if got := ledger.AwaitsEnd(b, r); got != s.await {
			t.Errorf("%s: kubelet asked at every poll %t, want %t", s.name, got, s.await)
		}
		ledger.PollWatch(ctx, b, r, s.await)
	}
	if hs := b.Snapshot().Holders(vfA0); len(hs) != 0 {
		t.Errorf("holders of %s once kubelet let the ended pod go: %+v, want none", vfA0, hs)
	}
	if ledger.AwaitsEnd(b, r) {
		t.Error("kubelet asked at every poll once it names no ended pod")
	}
}

// TestWatchSeesAnyCheckpointChange: a poll between kubelet's reads looks
// at every hwnet checkpoint, not only the running driver's: another
// driver's torn checkpoint makes the ledger unknown at the next poll.
func TestWatchSeesAnyCheckpointChange(t *testing.T) {
	_, src := newSources(t)
	src.PluginsDir = t.TempDir()
	b := openBook(t, ledger.BookOptions{Sources: src})
	ctx := watchBook(t, b)
	torn := filepath.Join(src.PluginsDir, "old.hwnet.io")
	if err := os.MkdirAll(torn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(torn, "checkpoint.json"), []byte(`{"format": "`+checkpoint.Marker+`", "version": 3, "claims": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	b.Nudge()
	waitSnapshot(ctx, t, b, "the torn checkpoint seen", func(l *ledger.Ledger) bool { return !l.Complete() })
}

// TestPendingAllocationOutlivesKubeletDown: a read kubelet did not answer
// says nothing of an allocation it has not reported: the hold stays until
// kubelet answers without it, late enough.
func TestPendingAllocationOutlivesKubeletDown(t *testing.T) {
	kubelet, src := newSources(t)
	src.Checkpoint = ""
	b, now := clockedBook(t, src)
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	kubelet.Close()
	*now = now.Add(11 * time.Second)
	if hs := b.Refresh(ctx).Holders(vfA0); len(hs) != 1 || !hs[0].Pending() {
		t.Fatalf("kubelet down 11 s after the allocation: holders %+v, want the pending allocation", hs)
	}
	back, err := testkubelet.ServePodResources(src.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	b.Refresh(ctx)
	*now = now.Add(kubeletSettleForTest)
	if hs := b.Refresh(ctx).Holders(vfA0); len(hs) != 0 {
		t.Errorf("kubelet back and settled without the allocation: holders %+v, want none", hs)
	}
}

// clockedBook is a Book on src, loaded, whose clock reads *now; the test
// moves it.
func clockedBook(t *testing.T, src ledger.Sources) (*ledger.Book, *time.Time) {
	t.Helper()
	now := time.Now()
	b := ledger.NewBook(ledger.BookOptions{Sources: src})
	b.Judge(ledger.Verdicts{})
	ledger.SetBookClock(b, func() time.Time { return now })
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, &now
}

// kubeletSettleForTest is past the Reader's default settle time.
const kubeletSettleForTest = 31 * time.Second

// TestAllocationOverALeftSandbox: kubelet lets a pod go whose DEL was
// lost (the agent was down), and allocates its device again: the Book
// asks kubelet afresh rather than take the sandbox for the pod's own, and
// refuses naming the sandbox; a StatefulSet's pod recreated under the
// same name is another pod.
func TestAllocationOverALeftSandbox(t *testing.T) {
	for _, recreated := range []bool{false, true} {
		t.Run(fmt.Sprintf("recreated=%t", recreated), func(t *testing.T) {
			m := newILModel()
			w := newILWorld(t, m)
			ctx := context.Background()
			vf := ilVFs(ilPFA)[0]
			m.pods["p"] = &ilPod{uid: "uid-1", resource: poolA, devices: []string{vf}}
			w.setPod("p", poolA, vf)
			w.book.Refresh(ctx)
			sb := &ilSandbox{pod: "p", podUID: "uid-1", resource: poolA, devices: []string{vf}}
			h := ledger.Holder{Kind: ledger.Container, Resource: poolA, Namespace: ilNS, Name: "p", Container: "sandbox-1", PodUIDs: []string{"uid-1"}}
			if err := w.book.Reserve(ctx, ledger.Request{Devices: []string{vf}, Holder: h}); err != nil {
				t.Fatal(err)
			}
			w.writeRecord("sandbox-1", sb)
			delete(m.pods, "p")
			w.setPod("p", poolA)
			if recreated {
				m.pods["p"] = &ilPod{uid: "uid-2", resource: poolA}
			}
			err := w.book.Reserve(ctx, ledger.Request{Devices: []string{vf}, Holder: ledger.Holder{Kind: ledger.Pod, Resource: poolA}})
			if err == nil || !strings.Contains(err.Error(), "is held by container sandbox-1 of pod ns/p") {
				t.Fatalf("kubelet's allocation of the left sandbox's device: %v, want it refused naming the sandbox", err)
			}
		})
	}
}

// TestPendingAllocationNotSettledByTheLastPod: kubelet's answer from
// before an allocation, which names the device's last pod, does not
// settle it, even on a clock that read the same for both.
func TestPendingAllocationNotSettledByTheLastPod(t *testing.T) {
	kubelet, src := newSources(t)
	src.Checkpoint = ""
	kubelet.SetPod("ns", "last", "intel.com/vf", vfA0)
	b, _ := clockedBook(t, src)
	ctx := context.Background()
	kubelet.SetPod("ns", "last", "intel.com/vf")
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	// A release reads the files again, and takes kubelet's last answer.
	b.Release(ctx, claimC)
	if hs := b.Snapshot().Holders(vfA0); !slices.ContainsFunc(hs, ledger.Holder.Pending) {
		t.Errorf("holders %+v, want the pending allocation kept", hs)
	}
}

// TestPendingAllocationNotSettledByAStartingKubelet: an answer kubelet
// gave while it started does not settle an allocation it leaves out, even
// once kubelet has run its settle time: only a later answer does.
func TestPendingAllocationNotSettledByAStartingKubelet(t *testing.T) {
	kubelet, src := newSources(t)
	src.Checkpoint = ""
	b, now := clockedBook(t, src)
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: dpPod}); err != nil {
		t.Fatal(err)
	}
	kubelet.Close()
	restarted, err := testkubelet.ServePodResources(src.PodResourcesSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer restarted.Close()
	*now = now.Add(11 * time.Second) // past an allocation's grace
	b.Refresh(ctx)
	*now = now.Add(kubeletSettleForTest)
	b.Release(ctx, claimC) // reads the files, takes kubelet's last answer
	if hs := b.Snapshot().Holders(vfA0); !slices.ContainsFunc(hs, ledger.Holder.Pending) {
		t.Errorf("after the starting kubelet's answer: holders %+v, want the pending allocation kept", hs)
	}
	if hs := b.Refresh(ctx).Holders(vfA0); len(hs) != 0 {
		t.Errorf("kubelet settled, answering without it: holders %+v, want none", hs)
	}
}

// TestFenceCoversScalableFunctions: a PF's fence covers its scalable
// functions (auxiliary devices below it) as it covers its VFs: one held
// keeps the fence from being taken, naming the SF and its holder, and
// none is handed out under it; another PF's SF is not fenced.
func TestFenceCoversScalableFunctions(t *testing.T) {
	sysfs := sysfsWithVFs(t)
	sfA, sfB := "mlx5_core.sf.2", "mlx5_core.sf.3"
	for sf, pf := range map[string]string{sfA: pfA, sfB: pfB} {
		dir := filepath.Join(sysfs, "devices", pf, sf)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(sysfs, "bus/auxiliary/devices"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dir, filepath.Join(sysfs, "bus/auxiliary/devices", sf)); err != nil {
			t.Fatal(err)
		}
	}
	b := openBook(t, ledger.BookOptions{SysfsRoot: sysfs})
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{sfA}, Holder: claimC}); err != nil {
		t.Fatal(err)
	}
	fence := ledger.Fence{Key: "vf-layout/" + pfA, PF: pfA, Reason: "its PF's VF layout is changing"}
	if err := b.Fence(ctx, fence, true); err == nil || !strings.Contains(err.Error(), "device "+sfA+" is held by claim ns/c") {
		t.Fatalf("Fence with the PF's SF held: %v, want it refused naming the SF and the claim", err)
	}
	b.Release(ctx, claimC)
	if err := b.Fence(ctx, fence, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{sfA}, Holder: claimD}); err == nil || !strings.Contains(err.Error(), "is fenced") {
		t.Errorf("Reserve of the fenced PF's SF: %v, want refused as fenced", err)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{sfB}, Holder: claimD}); err != nil {
		t.Errorf("Reserve of another PF's SF: %v", err)
	}
}

// TestFenceFollowsARecreatedScalableFunction: the kernel gives an SF's
// auxiliary device name (mlx5_core.sf.N) to the next SF made, on any PF;
// an SF deleted under PF A and made again under PF B is B's, and B's
// fence covers it.
func TestFenceFollowsARecreatedScalableFunction(t *testing.T) {
	sysfs := sysfsWithVFs(t)
	sf := "mlx5_core.sf.4"
	link := filepath.Join(sysfs, "bus/auxiliary/devices", sf)
	moveSF := func(pf string) {
		t.Helper()
		dir := filepath.Join(sysfs, "devices", pf, sf)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(link); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if err := os.Symlink(dir, link); err != nil {
			t.Fatal(err)
		}
	}
	moveSF(pfA)
	b := openBook(t, ledger.BookOptions{SysfsRoot: sysfs})
	ctx := context.Background()
	fenceA := ledger.Fence{Key: "vf-layout/" + pfA, PF: pfA, Reason: "its PF's VF layout is changing"}
	if err := b.Fence(ctx, fenceA, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{sf}, Holder: claimD}); err == nil {
		t.Fatal("Reserve of the fenced PF's SF passed")
	}
	if err := b.Unfence(fenceA.Key); err != nil {
		t.Fatal(err)
	}
	moveSF(pfB)
	fenceB := ledger.Fence{Key: "vf-layout/" + pfB, PF: pfB, Reason: "its PF's VF layout is changing"}
	if err := b.Fence(ctx, fenceB, true); err != nil {
		t.Fatal(err)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{sf}, Holder: claimD}); err == nil || !strings.Contains(err.Error(), "is fenced") {
		t.Errorf("Reserve of %s made again under the fenced PF %s: %v, want refused as fenced", sf, pfB, err)
	}
}

// probeFake stands in for a devhealth.Probe answer: it notes each device
// asked, and says why for those bad names.
func probeFake(asked *[]string, bad map[string]bool, why string) func(string) error {
	return func(d string) error {
		*asked = append(*asked, d)
		if bad[d] {
			return errors.New(why)
		}
		return nil
	}
}

// TestReserveProbesThePFLink: every Reserve asks PFUp of each device,
// before the verdicts can say its PF's link went down (link events lag
// the kernel, by seconds while the agent waits on kubelet): one whose PF
// is down is refused with the reason, even for the holder that has it;
// the others go.
func TestReserveProbesThePFLink(t *testing.T) {
	down := map[string]bool{}
	var asked []string
	b := openBook(t, ledger.BookOptions{PFUp: probeFake(&asked, down, "its PF's link ens1 is down")})
	ctx := context.Background()
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0, vfA1}, Holder: claimC}); err != nil {
		t.Fatalf("Reserve with the PF's link up: %v", err)
	}
	if !slices.Equal(asked, []string{vfA0, vfA1}) {
		t.Errorf("PFUp asked of %v, want each device", asked)
	}
	for _, req := range []ledger.Request{{Devices: []string{vfA1}, Holder: claimC}, {Devices: []string{vfB0}, Holder: claimD}} {
		down[req.Devices[0]] = true
		err := b.Reserve(ctx, req)
		if want := "device " + req.Devices[0] + " is unhealthy: its PF's link ens1 is down"; err == nil || err.Error() != want {
			t.Errorf("Reserve of %s by %s with its PF down: %v, want %q", req.Devices[0], req.Holder, err, want)
		}
	}
}

// TestReserveProbesTheNetdev: a Reserve asks Present of each device whose
// netdev no hold explains away, before the verdicts can say the netdev
// left (link events lag the kernel): one gone is refused with the reason;
// a holder that has the device already, or a sandbox's attachment, is not
// asked.
func TestReserveProbesTheNetdev(t *testing.T) {
	gone := map[string]bool{vfA0: true}
	var asked []string
	b := openBook(t, ledger.BookOptions{Present: probeFake(&asked, gone, "its netdev ens1v0 is not in the node's network namespace")})
	ctx := context.Background()
	err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimC})
	if err == nil || err.Error() != "device "+vfA0+" is unhealthy: its netdev ens1v0 is not in the node's network namespace" {
		t.Fatalf("Reserve of a device whose netdev is gone: %v", err)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA1}, Holder: claimC}); err != nil {
		t.Fatalf("Reserve of a device whose netdev is there: %v", err)
	}
	gone[vfA1], asked = true, nil
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA1}, Holder: claimC}); err != nil {
		t.Errorf("the claim that holds %s prepared again: %v", vfA1, err)
	}
	if len(asked) != 0 {
		t.Errorf("Present asked of %v for a device its holder has", asked)
	}
}

// TestSnapshotsChanged: a Book's snapshots say which devices' holders
// differ, and whether a fence or an unknown source makes every device
// differ, whether published one after the other or apart; a snapshot of
// another Book is judged by what it holds. Equal is none of either.
func TestSnapshotsChanged(t *testing.T) {
	kubelet, src := newSources(t)
	kubelet.SetPod("ns", "a", "intel.com/vf", "0000:3b:02.0")
	b := openBook(t, ledger.BookOptions{Sources: src})
	hold := ledger.Request{Devices: []string{"0000:3b:02.1"}, Holder: claimC}
	first := b.Refresh(t.Context())
	again := b.Refresh(t.Context())
	if err := b.Reserve(t.Context(), hold); err != nil {
		t.Fatal(err)
	}
	held := b.Snapshot()
	b.Release(t.Context(), claimC)
	released := b.Refresh(t.Context())
	if err := b.Fence(t.Context(), ledger.Fence{Key: "k", Devices: []string{"0000:3b:02.5"}, Reason: "switching"}, false); err != nil {
		t.Fatal(err)
	}
	fenced := b.Snapshot()
	other := openBook(t, ledger.BookOptions{Sources: src})
	otherFirst := other.Refresh(t.Context())
	unknown := ledger.New(map[string][]ledger.Holder{}, []string{"kubelet's PodResources: unreachable"})
	for _, tc := range []struct {
		name        string
		a, c        *ledger.Ledger
		wantDevices []string
		wantEvery   bool
	}{
		{"read again, nothing changed", first, again, nil, false},
		{"a hold taken", again, held, []string{"0000:3b:02.1"}, false},
		{"the hold released", held, released, []string{"0000:3b:02.1"}, false},
		{"apart, the same holds", first, released, nil, false},
		{"another Book, the same holds", released, otherFirst, nil, false},
		{"another Book, other holds", held, otherFirst, []string{"0000:3b:02.1"}, false},
		{"a fence", released, fenced, nil, true},
		{"a source unknown", released, unknown, nil, true},
		{"nothing read", nil, released, nil, true},
	} {
		devices, every := tc.a.Changed(tc.c)
		if !slices.Equal(devices, tc.wantDevices) || every != tc.wantEvery {
			t.Errorf("%s: Changed %v, %t, want %v, %t", tc.name, devices, every, tc.wantDevices, tc.wantEvery)
		}
		if got, want := tc.a.Equal(tc.c), tc.wantDevices == nil && !tc.wantEvery; got != want {
			t.Errorf("%s: Equal %t, want %t", tc.name, got, want)
		}
	}
}

// TestChangesSignalled: every change of what Snapshot says is sent on
// Changes, unless its receiver holds it (a look is scheduled); a read
// that changes nothing sends nothing.
func TestChangesSignalled(t *testing.T) {
	_, src := newSources(t)
	b := openBook(t, ledger.BookOptions{Sources: src})
	b.Refresh(t.Context())
	changes := b.Changes()
	drain := func() bool {
		select {
		case <-changes.C():
			return true
		default:
			return false
		}
	}
	drain()
	reserve := func(addr string) {
		if err := b.Reserve(t.Context(), ledger.Request{Devices: []string{addr}, Holder: claimC}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func()
		want bool
	}{
		{"read again, nothing changed", func() { b.Refresh(t.Context()) }, false},
		{"a hold taken", func() { reserve("0000:3b:02.1") }, true},
		{"released while held", func() { changes.Hold(); b.Release(t.Context(), claimC) }, false},
		{"taken after release", func() { changes.Release(); reserve("0000:3b:02.2") }, true},
	}
	for _, s := range steps {
		s.do()
		if got := drain(); got != s.want {
			t.Errorf("%s: signalled %t, want %t", s.name, got, s.want)
		}
	}
}
