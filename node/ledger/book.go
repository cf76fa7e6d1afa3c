package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/internal/wakeup"
)

// BookOptions configure a Book.
type BookOptions struct {
	// Sources are read at Load, on a conflict and by Watch.
	Sources Sources
	// SysfsRoot is where a VF's PF is read (its physfn link), for fences.
	SysfsRoot string
	// FenceDir keeps the fences that outlive the agent (Fence.Layout).
	FenceDir string
	Logger   *slog.Logger
	Metrics  *metrics.Metrics
	// Changed is called, without the Book's lock, after each change of
	// what Snapshot says; it must not block. Book.Changes signals the
	// same changes.
	Changed func()
	// PendingGrace is how long a device plugin allocation kubelet does not
	// report yet is kept; 0 means DefaultPendingGrace.
	PendingGrace time.Duration
	// Present, when set, is asked under the lock for each device of a
	// Reserve whose netdev no hold explains away: nil when the device's
	// netdev is in the node's network namespace (or it has none), the
	// reason otherwise. The verdicts come from link events, which lag the
	// kernel; this is the fresh read of the one source they summarise.
	Present func(device string) error
	// PFUp, when set, is asked under the lock for each device of every
	// Reserve: nil when the device's PF has its link up (or it has no PF
	// netdev), the reason otherwise; the fresh read of the PF's link,
	// whose verdict the link events bring late.
	PFUp func(device string) error
}

// DefaultPendingGrace is how long a device plugin allocation kubelet does
// not report yet is kept: kubelet records an allocation as Allocate
// returns, so a PodResources answer this much younger that still does not
// name it means the pod was refused or is gone.
const DefaultPendingGrace = 10 * time.Second

// reserveReadTimeout bounds the fresh read a conflicting Reserve makes
// under the lock.
const reserveReadTimeout = 2 * time.Second

// Book is the node's live ledger and the one path a device takes to
// change hands. Its methods are safe for concurrent use; each takes one
// lock, so a Reserve sees every Reserve, Release and Fence before it.
type Book struct {
	o      BookOptions
	log    *slog.Logger
	files  fenceFiles
	mu     sync.Mutex
	reader *Reader
	// sourced is the sources as last read, by this Book's reader or
	// Watch's; live the holds Reserve took that Release has not given
	// back; fences the fences in force by key; verdicts what health
	// says of the devices (Judge).
	sourced  *Ledger
	live     []liveHold
	fences   map[string]Fence
	verdicts Verdicts
	// judged is false until the first Judge: what health says is unknown.
	judged bool
	// pfs caches each VF's PF, read from sysfs.
	pfs  map[string]string
	snap atomic.Pointer[Ledger]
	now  func() time.Time
	// wake has Watch poll at once after a change (a hold kubelet must
	// report may have begun), or as soon as it may. recheck makes that
	// poll ask kubelet.
	wake    *wakeup.Signal
	recheck atomic.Bool
	// changes is Changes.
	changes *wakeup.Signal
	// podEnded is when a pod of the node last ended (PodEnded), in
	// nanoseconds of now's clock; 0 for never.
	podEnded atomic.Int64
}

// liveHold is a hold Reserve took.
type liveHold struct {
	device string
	holder Holder
	at     time.Time
}

// NewBook makes a Book that holds nothing and knows nothing: every source
// is unknown until Load.
func NewBook(o BookOptions) *Book {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.PendingGrace = cmp.Or(o.PendingGrace, DefaultPendingGrace)
	b := &Book{o: o, log: o.Logger, files: fenceFiles{dir: o.FenceDir}, reader: NewReader(o.Sources),
		fences: map[string]Fence{}, pfs: map[string]string{}, now: time.Now,
		wake: wakeup.New(), changes: wakeup.New()}
	b.sourced = New(map[string][]Holder{}, []string{"the device ledger: not read yet"})
	b.snap.Store(b.sourced)
	return b
}

// Load reads every source and the fences an earlier agent left: before
// any front end serves, the Book knows what its predecessor handed out
// and which PF it was changing. A fence file that cannot be read fails
// the load: which PF it fences is not known.
func (b *Book) Load(ctx context.Context) error {
	fences, err := LoadFences(b.o.FenceDir)
	if err != nil {
		return fmt.Errorf("device ledger: fences in %s: %w", b.o.FenceDir, err)
	}
	b.mu.Lock()
	for _, f := range fences {
		b.fences[f.Key] = f
	}
	b.mu.Unlock()
	b.Refresh(ctx)
	return nil
}

// Close ends the talk with kubelet.
func (b *Book) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reader.Close()
}

// Snapshot is who holds what now, with the fences in force. It never
// blocks.
func (b *Book) Snapshot() *Ledger { return b.snap.Load() }

// Refresh reads every source now and returns the new snapshot.
func (b *Book) Refresh(ctx context.Context) *Ledger {
	b.mu.Lock()
	b.readLocked(ctx, true)
	l, changed := b.publishLocked()
	b.mu.Unlock()
	b.changed(changed)
	return l
}

// readLocked reads the sources with the Book's reader; kubelet only with
// askKubelet.
func (b *Book) readLocked(ctx context.Context, askKubelet bool) {
	b.reader.follow(b.sourced)
	b.applyLocked(b.reader.read(ctx, askKubelet))
}

// sourcedNow is the sources as last read, for Watch's reader to follow.
func (b *Book) sourcedNow() *Ledger {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sourced
}

// Apply takes a read of the sources made by another reader (Watch's),
// which reads outside the Book's lock. One that began before the Book's
// last read ended may have seen a file before that read did (a checkpoint
// not yet torn, a record not yet written) and must not undo it: of such a
// read the Book keeps only a newer answer of kubelet, and reads the other
// sources again.
func (b *Book) Apply(ctx context.Context, l *Ledger) {
	b.mu.Lock()
	if b.sourced != nil && l.taken.Before(b.sourced.done) {
		b.reader.follow(l)
		b.readLocked(ctx, false)
	} else {
		b.applyLocked(l)
	}
	_, changed := b.publishLocked()
	b.mu.Unlock()
	b.changed(changed)
}

// applyLocked makes l the sources' view and drops the pending
// allocations it settles: kubelet, asked after the allocation, reports
// them, or, answering late enough and not starting, does not. A read
// kubelet did not answer settles none; nor does an answer asked for as
// the allocation was made, which may report the device's last pod.
func (b *Book) applyLocked(l *Ledger) {
	l = l.withNewerKubelet(b.sourced)
	b.sourced = l
	b.live = slices.DeleteFunc(b.live, func(h liveHold) bool {
		if !h.holder.Pending() || !l.kube.at.After(h.at) {
			return false
		}
		reported := slices.ContainsFunc(l.Holders(h.device), func(o Holder) bool {
			return o.Kind == Pod && o.Resource == h.holder.Resource
		})
		return reported || !l.kube.starting && !l.kube.at.Before(h.at.Add(b.o.PendingGrace))
	})
}

// publishLocked makes the snapshot anew and reports whether it changed.
func (b *Book) publishLocked() (*Ledger, bool) {
	// The sources' holder lists are shared, sorted and never written: a
	// hand-out on a full node copies only the lists the live holds add to.
	byDevice := maps.Clone(b.sourced.byDevice)
	if byDevice == nil {
		byDevice = make(map[string][]Holder, len(b.live))
	}
	for _, h := range b.live {
		hs := byDevice[h.device]
		if !slices.ContainsFunc(hs, func(o Holder) bool { return sameHolder(o, h.holder) }) {
			hs = append(slices.Clip(hs), h.holder)
			slices.SortFunc(hs, compareHolders)
			byDevice[h.device] = hs
		}
	}
	l := &Ledger{byDevice: byDevice, Unknown: b.sourced.Unknown, ReadAt: b.sourced.ReadAt, taken: b.sourced.taken, done: b.sourced.done}
	l.fences = slices.SortedFunc(maps.Values(b.fences), func(a, c Fence) int { return strings.Compare(a.Key, c.Key) })
	l.fences = append(l.fences, b.sourced.resets...)
	l.resets = b.sourced.resets
	prev := b.snap.Load()
	changed := !l.Equal(prev)
	l.book, l.version = b, 1
	if prev != nil {
		l.version = prev.version
		if changed {
			l.version++
		}
	}
	b.snap.Store(l)
	return l, changed
}

// unlockAndPublish makes the snapshot anew, releases the lock, reports
// the change and counts err, a refusal, if any; it returns err.
func (b *Book) unlockAndPublish(err error) error {
	_, changed := b.publishLocked()
	b.mu.Unlock()
	b.changed(changed)
	if err != nil {
		b.o.Metrics.LedgerRefused(conflictReason(err))
	}
	return err
}

// changed reports a publish that changed the snapshot to the metrics and
// to Changed. It runs outside the lock, so another publish may have come
// in between: the metrics take the newest snapshot, not the one this
// publish made, or a late report would leave an older one's.
func (b *Book) changed(changed bool) {
	if !changed {
		return
	}
	l := b.snap.Load()
	b.o.Metrics.SetLedgerUnknown(len(l.Unknown))
	b.o.Metrics.SetLedgerFences(len(l.fences))
	b.wake.Send()
	b.changes.Send()
	if b.o.Changed != nil {
		b.o.Changed()
	}
}

// Request is one hand-out: devices going to one holder.
type Request struct {
	// Devices are device IDs (PCI addresses, "<address>:p<port>").
	Devices []string
	Holder  Holder
}

// Reserve hands the devices to the holder, or refuses with a *Conflict
// naming the first device that cannot go and why: a fence covers it, a
// source is unknown, its health is not judged yet (no Judge), it is
// unhealthy, or a holder it is not compatible
// with has it. A conflict that a fresh read could settle (a pod kubelet
// may have let go, a source back, a file another process changed) reads
// every source once more under the lock before refusing. A Reserve the
// same holder already has is no change.
func (b *Book) Reserve(ctx context.Context, req Request) error {
	if len(req.Devices) == 0 {
		return nil
	}
	b.mu.Lock()
	err := b.freshCheckLocked(ctx, func(fresh bool) error { return b.checkLocked(req, fresh) })
	if err == nil {
		b.holdLocked(req, b.now())
	}
	return b.unlockAndPublish(err)
}

// holdLocked adds req's live holds taken at at. A device the holder has
// already keeps its hold; a pending allocation's starts its grace at at:
// kubelet allocated it again, and the answers that settle it are those
// asked after this allocation, not the last one.
func (b *Book) holdLocked(req Request, at time.Time) {
	for _, d := range req.Devices {
		i := slices.IndexFunc(b.live, func(h liveHold) bool { return h.device == d && sameHolder(h.holder, req.Holder) })
		switch {
		case i < 0:
			b.live = append(b.live, liveHold{device: d, holder: req.Holder, at: at})
		case req.Holder.Pending():
			b.live[i].at = at
		}
	}
}

// freshCheckLocked runs check, and once more after a fresh read of every
// source when its conflict is one a fresh read could settle; check is
// told whether the sources were just read. The read is published
// whatever the outcome.
func (b *Book) freshCheckLocked(ctx context.Context, check func(fresh bool) error) error {
	err := check(false)
	var c *Conflict
	if !errors.As(err, &c) || !c.refreshable {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, reserveReadTimeout)
	defer cancel()
	b.readLocked(rctx, true)
	return check(true)
}

// Release gives back every device the holder has through Reserve, and
// reads the sources that are files again: the caller removed the hold
// from its own (checkpoint, record) first.
func (b *Book) Release(ctx context.Context, h Holder) {
	b.mu.Lock()
	b.live = slices.DeleteFunc(b.live, func(l liveHold) bool { return sameHolder(l.holder, h) })
	b.readLocked(ctx, false)
	b.unlockAndPublish(nil)
}

// checkLocked is nil when every device of req may go to its holder.
// Unless the sources were just read (fresh), a kubelet allocation over a
// sandbox's hold is a conflict to read again for: it is compatible only
// while kubelet still reports the sandbox's pod, and kubelet may have let
// that pod go, its sandbox left behind (its DEL lost), since it was last
// asked.
func (b *Book) checkLocked(req Request, fresh bool) error {
	for _, d := range req.Devices {
		if f, ok := b.fencedLocked(d); ok {
			return &Conflict{Device: d, Reason: Fenced, Why: f.Reason}
		}
		if !b.sourced.Complete() {
			return &Conflict{Device: d, Reason: Unknown, Why: b.sourced.UnknownWhy(), refreshable: true}
		}
		if !b.judged {
			return &Conflict{Device: d, Reason: Unknown, Why: notJudgedWhy}
		}
		if why, bad := b.verdicts.Unhealthy[d]; bad {
			return &Conflict{Device: d, Reason: Unhealthy, Why: why}
		}
		if err := b.pfUpLocked(d); err != nil {
			return err
		}
		if err := b.presentLocked(req.Holder, d); err != nil {
			return err
		}
		if err := b.holdersAllowLocked(req.Holder, d, fresh); err != nil {
			return err
		}
	}
	return nil
}

// pfUpLocked is nil unless a fresh probe says d's PF's link is down: a
// device whose PF carries no traffic is unhealthy whoever asks, as the
// verdicts would say once the link event arrives.
func (b *Book) pfUpLocked(d string) error {
	if b.o.PFUp == nil {
		return nil
	}
	if err := b.o.PFUp(d); err != nil {
		return &Conflict{Device: d, Reason: Unhealthy, Why: err.Error()}
	}
	return nil
}

// presentLocked is nil unless d's netdev is away from the node's network
// namespace, as the verdicts or a fresh probe say, and no hold explains it.
func (b *Book) presentLocked(h Holder, d string) error {
	if !b.verdicts.Away[d] && b.o.Present == nil || b.awayExplainedLocked(h, d) {
		return nil
	}
	if b.verdicts.Away[d] {
		return &Conflict{Device: d, Reason: Unhealthy, Why: awayWhy}
	}
	if err := b.o.Present(d); err != nil {
		return &Conflict{Device: d, Reason: Unhealthy, Why: err.Error()}
	}
	return nil
}

// holdersAllowLocked is nil when every holder of d is compatible with h.
func (b *Book) holdersAllowLocked(h Holder, d string, fresh bool) error {
	all := b.holdersLocked(d)
	for _, e := range all {
		stale := !fresh && h.Kind == Pod && e.Kind == Container
		if stale || !compatible(h, e, all) {
			return &Conflict{Device: d, Reason: Held, Holder: e, Why: e.String(), refreshable: stale || b.sourcedHold(d, e)}
		}
	}
	return nil
}

// sourcedHold reports whether only a source says e holds d: a fresh read
// may find it gone. A hold Reserve took stands until Release.
func (b *Book) sourcedHold(d string, e Holder) bool {
	return !slices.ContainsFunc(b.live, func(h liveHold) bool { return h.device == d && sameHolder(h.holder, e) && !e.Pending() })
}

// holdersLocked are the device's holders: the sources' and the live ones.
func (b *Book) holdersLocked(d string) []Holder {
	hs := slices.Clone(b.sourced.Holders(d))
	for _, h := range b.live {
		if h.device == d && !slices.ContainsFunc(hs, func(o Holder) bool { return sameHolder(o, h.holder) }) {
			hs = append(hs, h.holder)
		}
	}
	return hs
}

// fencedLocked is the fence that covers the device, if any. A device
// whose PF cannot be read while a PF is fenced counts as covered: it may
// be a VF the change is taking away.
func (b *Book) fencedLocked(d string) (Fence, bool) {
	for _, f := range b.sourced.resets {
		if f.covers(d, "") {
			return f, true
		}
	}
	if len(b.fences) == 0 {
		return Fence{}, false
	}
	pf, err := b.pfOfLocked(FunctionOf(d))
	for _, f := range b.fences {
		if f.covers(d, pf) {
			return f, true
		}
		if err != nil && f.PF != "" {
			return Fence{Key: f.Key, PF: f.PF, Reason: fmt.Sprintf("%s; and the device's PF cannot be read: %v", f.Reason, err)}, true
		}
	}
	return Fence{}, false
}

// pfOfLocked is the PF of the function at addr, "" when it is no VF or
// SF: a scalable function (an auxiliary device) has its PF's changes for
// its own, as a VF has. A VF's PF is kept, as its address is its PF's
// offset and stride; an SF's is read each time, as the kernel gives its
// name to the next SF made, on any PF.
func (b *Book) pfOfLocked(addr string) (string, error) {
	if pf, ok := b.pfs[addr]; ok {
		return pf, nil
	}
	if pf, err := filepath.EvalSymlinks(filepath.Join(b.o.SysfsRoot, "bus/auxiliary/devices", addr)); err == nil {
		return filepath.Base(filepath.Dir(pf)), nil
	}
	dev := filepath.Join(b.o.SysfsRoot, "bus/pci/devices", addr)
	if _, err := os.Stat(dev); err != nil {
		return "", err
	}
	target, err := os.Readlink(filepath.Join(dev, "physfn"))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	pf := filepath.Base(target)
	b.pfs[addr] = pf
	return pf, nil
}

// Judge records what health says of the devices; Reserve refuses the
// unhealthy ones and those Verdicts.Away explains, and every device until
// the first Judge. v replaces the last verdicts; the caller must not
// change its maps afterwards.
func (b *Book) Judge(v Verdicts) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.verdicts, b.judged = v, true
}

// Fence withdraws the devices f covers from every front end. With free,
// it is refused with a *Conflict while any of them is held or a source is
// unknown (a fresh read first, as Reserve), so that a change that takes
// devices away never runs under a holder. A fence with a Layout is kept
// on disk before Fence returns.
func (b *Book) Fence(ctx context.Context, f Fence, free bool) error {
	if f.Since.IsZero() {
		f.Since = b.now()
	}
	b.mu.Lock()
	err := b.freshCheckLocked(ctx, func(bool) error { return b.fenceCheckLocked(f, free) })
	if err == nil && f.Layout != nil {
		err = b.files.save(f)
	}
	if err == nil {
		b.fences[f.Key] = f
	}
	return b.unlockAndPublish(err)
}

// fenceCheckLocked is nil when f may be taken: without free always, with
// it when no device f covers is held and every source was read.
func (b *Book) fenceCheckLocked(f Fence, free bool) error {
	if !free {
		return nil
	}
	if !b.sourced.Complete() {
		return &Conflict{Device: cmpOr(f.PF, strings.Join(f.Devices, ",")), Reason: Unknown, Why: b.sourced.UnknownWhy(), refreshable: true}
	}
	// The sources as last read, not the snapshot: a fresh read under the
	// lock is not published yet.
	ids := slices.Collect(maps.Keys(b.sourced.byDevice))
	for _, h := range b.live {
		ids = append(ids, h.device)
	}
	slices.Sort(ids)
	for _, id := range slices.Compact(ids) {
		pf, err := b.pfOfLocked(FunctionOf(id))
		if err != nil && f.PF != "" {
			pf = f.PF // a held device whose PF cannot be read may be the fence's
		}
		if !f.covers(id, pf) {
			continue
		}
		if hs := b.holdersLocked(id); len(hs) > 0 {
			return &Conflict{Device: id, Reason: Held, Holder: hs[0], Why: hs[0].String(), refreshable: b.sourcedHold(id, hs[0])}
		}
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Unfence lifts the fence with the key, from disk too. A fence already
// lifted is no error.
func (b *Book) Unfence(key string) error {
	b.mu.Lock()
	f, ok := b.fences[key]
	if !ok {
		b.mu.Unlock()
		return nil
	}
	if f.Layout != nil {
		if err := b.files.remove(key); err != nil {
			b.mu.Unlock()
			return err
		}
	}
	delete(b.fences, key)
	return b.unlockAndPublish(nil)
}

// Watch polls the sources as o says until ctx ends and applies each read
// to the Book, with a reader of its own: a slow kubelet holds no Reserve
// up. It polls every o.Interval, not only when o.Urgent, while a source
// is unknown (to serve again as soon as it is back) or an allocation
// waits for kubelet to report it. Its nudge is the Book's own (Nudge,
// and every change of the Book's holds): o.Nudge is not used. The reader
// is closed when Watch returns.
func (b *Book) Watch(ctx context.Context, o WatchOptions) {
	r := b.newWatchReader()
	urgent := o.Urgent
	o.Urgent = func() bool {
		return b.recheck.Swap(false) || b.Unsettled() || r.awaitsEnd(b.lastPodEnd()) || (urgent != nil && urgent())
	}
	o.Nudge = b.wake
	o.Latest = b.sourcedNow
	r.Watch(ctx, o, b.Apply)
}

// newWatchReader is the Book's second reader, Watch's: what it sees of
// kubelet (a restart, its asks' order) the Book's own reader sees too.
func (b *Book) newWatchReader() *Reader {
	r := NewReader(b.o.Sources)
	r.now, r.kubelet = b.now, b.reader.kubelet
	return r
}

// Changes is sent on after each change of what Snapshot says. Its one
// receiver may hold it while a look at the Book is scheduled, and must
// release it before that look.
func (b *Book) Changes() *wakeup.Signal { return b.changes }

// Nudge has Watch poll at once, or as soon as it may: a source may have
// changed, or Urgent turned true. It never blocks.
func (b *Book) Nudge() { b.wake.Send() }

// Recheck has Watch read every source, kubelet's PodResources included,
// at once: kubelet came back, and may have let pods go while it was down,
// or a collection waits for an answer newer than a file it left.
func (b *Book) Recheck() {
	b.recheck.Store(true)
	b.wake.Send()
}

// PodEnded tells the Book that a pod of the node ended or went, as the
// node's pods cache (Sources.PodRunning, Sources.PodEndsTold) saw it:
// kubelet stops naming the pod's devices about then, and says nothing
// when it does. Watch asks kubelet at once, and every Interval while its
// answer still names a pod the cache says does not run, for at most
// podsSettle after the last end.
func (b *Book) PodEnded() {
	b.podEnded.Store(b.now().UnixNano())
	b.wake.Send()
}

// lastPodEnd is when PodEnded was last told, zero for never.
func (b *Book) lastPodEnd() time.Time {
	if ns := b.podEnded.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// Unsettled reports whether a source is unknown, an allocation waits
// for kubelet to report it, or a VF reset is pending: only reading the
// sources again (which retries the resets) settles it.
func (b *Book) Unsettled() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.sourced.Complete() || len(b.sourced.resets) > 0 ||
		slices.ContainsFunc(b.live, func(h liveHold) bool { return h.holder.Pending() })
}
