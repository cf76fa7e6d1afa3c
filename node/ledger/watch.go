package ledger

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/internal/wakeup"
)

// Between the reads of Read, kubelet is asked only when an allocation may
// have begun or ended: kubelet says nothing when one does, but Allocate
// writes a device-info file, a teardown changes the records, and the
// node's pods cache sees a pod end (Book.PodEnded); the directories'
// times cost a stat. So an idle node costs a PodResources List per
// podsStale (podsStaleFollowed where the pods cache tells of ends), whose
// holds, when they are the last answer's, are not built again
// (Reader.sameAnswer), and, while a source directory cannot be watched
// (sourceWatch), a few stats per idlePoll.
const (
	// podsSettle is how long after a source changed kubelet is asked at
	// every poll: a pod's allocation ends after its teardown.
	podsSettle = 10 * time.Second
	// idlePoll is the time between polls of an idle node whose source
	// directories are not all watched (sourceWatch): a checkpoint or
	// record another process changed is seen within it.
	idlePoll = 30 * time.Second
	// podsStale is how old kubelet's answer may grow where nothing tells
	// of a pod's end but kubelet itself; podsStaleFollowed where the
	// node's pods cache does, and holds every pod the answer names
	// running. A hold kubelet still names after its pod ended withholds
	// its device from no one (a hand-out that meets it asks kubelet
	// afresh, and a wait for a hold to end polls every Interval); asking
	// every 30 s was the largest cost of an idle node with 1,500 devices
	// held (a cold decode of the answer, 5-9 ms). Where the cache tells
	// of ends, nothing but a missed end changes the answer (hand-outs go
	// through the Book), so podsStaleFollowed only bounds how long a hold
	// whose end was missed is shown: at 2 min its ask, 3-11 ms of CPU on
	// a 2 vCPU virtual machine, was the largest cost of an idle agent
	// once its watches lasted 30-60 min. podsSlack keeps a poll due at
	// podsStale from finding the answer a hair too young.
	podsStale         = 30 * time.Second
	podsStaleFollowed = 10 * time.Minute
	podsSlack         = time.Second
	// nudgeGap spaces the polls that nudges start: each hand-out nudges,
	// and a burst of them (kubelet admitting many pods) is read once per
	// gap rather than once per hand-out. No hand-out waits for a poll:
	// the Book checks each against its own holds, and reads afresh where
	// a fresh read could settle a conflict.
	nudgeGap = 50 * time.Millisecond
)

// stamps are the times of the sources that cost a stat to check.
type stamps struct {
	records, devinfo time.Time
	// checkpoints are every checkpoint's path, time and size, or why
	// they could not be listed.
	checkpoints string
}

// Poll is the ledger now. It asks kubelet when urgent (the caller waits
// for a hold to end), when a device-info file, a record or the checkpoint
// changed within podsSettle, or when kubelet's last answer is stale;
// else kubelet's last answer stands.
func (r *Reader) Poll(ctx context.Context, urgent bool) *Ledger {
	now := r.now()
	s := r.stamps()
	changed := s != r.seen
	if changed {
		r.seen, r.seenChanged = s, now
	}
	ask := urgent || now.Sub(r.seenChanged) < podsSettle || r.stale(now)
	if prev := r.polled; !ask && !changed && prev != nil {
		return prev // nothing to read: an idle node costs three stats
	}
	r.polled = r.read(ctx, ask)
	return r.polled
}

// stale reports whether kubelet's last answer is too old to stand at now:
// podsStale old, or podsStaleFollowed where the node's pods cache tells
// of each pod's end and says every pod the answer names runs. A pod the
// cache does not hold running can be one that ended before the cache
// started (an agent restarted while it terminated), of which no end is
// told.
func (r *Reader) stale(now time.Time) bool {
	age := now.Sub(r.podsAt)
	if age >= podsStaleFollowed-podsSlack {
		return true
	}
	return age >= podsStale-podsSlack && r.staleAfter() == podsStale
}

// staleAfter is how old kubelet's answer may grow (stale): podsStale,
// or podsStaleFollowed where the node's pods cache tells of ends and
// holds every pod the answer names running.
func (r *Reader) staleAfter() time.Duration {
	if !r.endsTold() || r.namesEnded() {
		return podsStale
	}
	return podsStaleFollowed
}

// endsTold reports whether the Book is told of each pod's end now.
func (r *Reader) endsTold() bool { return r.src.PodEndsTold != nil && r.src.PodEndsTold() }

// awaitsEnd reports whether a pod ended, at since, within podsSettle and
// kubelet's last answer still names a pod the node's pods cache says does
// not run: kubelet is then asked at every poll, every Interval.
func (r *Reader) awaitsEnd(since time.Time) bool {
	return !since.IsZero() && r.now().Sub(since) < podsSettle && r.namesEnded()
}

// namesEnded reports whether kubelet's last answer names a pod the node's
// pods cache says does not run.
func (r *Reader) namesEnded() bool {
	if r.src.PodRunning == nil {
		return false
	}
	// A pod holds many devices; the cache is asked once for each.
	asked := map[holderPod]bool{}
	for _, hs := range r.last[podsSource] {
		for _, h := range hs {
			if p := podOf(h); !asked[p] {
				asked[p] = true
				if !r.stillRuns(h) {
					return true
				}
			}
		}
	}
	return false
}

// stamps stats the sources; one that cannot be stat'ed has a zero time.
func (r *Reader) stamps() stamps {
	s := stamps{checkpoints: r.checkpointStamps()}
	if r.src.Records != nil {
		s.records, _ = r.src.Records.Changed()
	}
	s.devinfo = dirTime(r.src.DevinfoDir)
	return s
}

// checkpointStamps says, in a string that changes when any does, every
// DRA checkpoint's path, time and size: another driver's checkpoint torn
// must be seen by the next poll, not at the next read of kubelet.
func (r *Reader) checkpointStamps() string {
	if r.src.Checkpoint == "" && r.src.PluginsDir == "" {
		return ""
	}
	paths, err := r.checkpointPaths()
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", p, fi.ModTime().UnixNano(), fi.Size())
		}
	}
	return b.String()
}

// WatchOptions say when Watch polls.
type WatchOptions struct {
	// Interval is the time between polls while a hold's end is awaited
	// (Urgent); otherwise Watch polls when nudged and every idlePoll: a
	// timer that fires twice a second costs an idle agent more than
	// everything else it does.
	Interval time.Duration
	// Urgent says whether a hold's end is awaited.
	Urgent func() bool
	// Nudge says a source may have changed (an Allocate, a CNI request, a
	// prepare) or Urgent may have turned true: Watch polls at once, or
	// nudgeGap after the last poll. Watch holds it while that poll is
	// scheduled, which sees every change made before a nudge it dropped.
	Nudge *wakeup.Signal
	// Latest is the newest read of the sources, whose answer of kubelet
	// the reader follows before each poll if it is newer than its own
	// (Reader.follow); nil for none.
	Latest func() *Ledger
}

// Watch polls the ledger, as o says, until ctx ends, and calls apply
// with every poll's ledger, the first included. The reader is closed when
// Watch returns.
func (r *Reader) Watch(ctx context.Context, o WatchOptions, apply func(context.Context, *Ledger)) {
	defer r.Close()
	if o.Nudge == nil {
		o.Nudge = wakeup.New()
	}
	sources := newSourceWatch(r.src)
	var wg sync.WaitGroup
	defer wg.Wait()
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	wg.Go(func() { sources.run(watchCtx) })
	timer := time.NewTimer(0)
	defer timer.Stop()
	// due is when the timer fires; last when the last poll ended.
	var due, last time.Time
	for polled := false; ; polled = true {
		if !waitPoll(ctx, o.Nudge, sources.changed, timer, &due, last) {
			return
		}
		if o.Latest != nil {
			r.follow(o.Latest())
		}
		l := r.Poll(ctx, !polled || o.Urgent())
		if ctx.Err() != nil {
			return
		}
		apply(ctx, l)
		last = time.Now()
		// Asked after the poll: the poll may have found a source gone,
		// which only polling often finds back.
		next := r.idleFor(sources.watched.Load())
		if o.Urgent() {
			next = o.Interval
		}
		timer.Reset(next)
		due = last.Add(next)
	}
}

// waitPoll waits until a poll is due: the timer fired, or a nudge or a
// source's change came nudgeGap or more after the last poll; one sooner
// brings the timer forward to then, and the nudge is held until it fires:
// a nudge meanwhile could bring the poll no sooner. It is false once ctx
// ends.
func waitPoll(ctx context.Context, nudge *wakeup.Signal, changed <-chan struct{}, timer *time.Timer, due *time.Time, last time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			nudge.Release()
			return true
		case <-nudge.C():
		case <-changed:
		}
		at := last.Add(nudgeGap)
		if !time.Now().Before(at) {
			// Held or not, the poll is now.
			nudge.Release()
			return true
		}
		if at.Before(*due) {
			timer.Reset(time.Until(at))
			*due = at
		}
		nudge.Hold()
	}
}

// idleFor is how long a watch that awaits no hold's end waits for its
// next poll: while every source directory is watched (sourceWatch), a
// change of a source sends an event, and only kubelet's answer ages, so
// until that answer is stale; else idlePoll.
func (r *Reader) idleFor(watched bool) time.Duration {
	if !watched {
		return idlePoll
	}
	if r.src.PodResourcesSocket == "" {
		return podsStaleFollowed // nothing ages: a timer, not a spin
	}
	return max(r.podsAt.Add(r.staleAfter()).Sub(r.now()), nudgeGap)
}
