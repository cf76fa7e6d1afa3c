package ledger

import (
	"context"
	"os"
	"time"
)

// Between the reads of Read, kubelet is asked only when an allocation may
// have begun or ended: kubelet says nothing when one does, but Allocate
// writes a device-info file and a teardown changes the records, and their
// directories' times cost a stat. So an idle node costs a few stats per
// poll and a PodResources List per podsStale.
const (
	// podsSettle is how long after a source changed kubelet is asked at
	// every poll: a pod's allocation ends after its teardown.
	podsSettle = 10 * time.Second
	// podsStale is how old kubelet's answer may grow.
	podsStale = 30 * time.Second
)

// stamps are the times of the sources that cost a stat to check.
type stamps struct {
	checkpoint, records, devinfo time.Time
	checkpointSize               int64
}

// Poll is the ledger now. It asks kubelet when urgent (the caller waits
// for a hold to end), when a device-info file, a record or the checkpoint
// changed within podsSettle, or when kubelet's last answer is podsStale
// old; else kubelet's last answer stands.
func (r *Reader) Poll(ctx context.Context, urgent bool) *Ledger {
	now := r.now()
	s := r.stamps()
	changed := s != r.seen
	if changed {
		r.seen, r.seenChanged = s, now
	}
	ask := urgent || now.Sub(r.seenChanged) < podsSettle || now.Sub(r.podsAt) >= podsStale
	if prev := r.polled; !ask && !changed && prev != nil {
		return prev // nothing to read: an idle node costs three stats
	}
	r.polled = r.read(ctx, ask)
	return r.polled
}

// stamps stats the sources; one that cannot be stat'ed has a zero time.
func (r *Reader) stamps() stamps {
	var s stamps
	if fi, err := os.Stat(r.src.Checkpoint); err == nil && r.src.Checkpoint != "" {
		s.checkpoint, s.checkpointSize = fi.ModTime(), fi.Size()
	}
	if r.src.Records != nil {
		s.records, _ = r.src.Records.Changed()
	}
	if fi, err := os.Stat(r.src.DevinfoDir); err == nil && r.src.DevinfoDir != "" {
		s.devinfo = fi.ModTime()
	}
	return s
}

// Watch polls the ledger every interval until ctx ends, urgent when
// urgent says so, and calls changed with every ledger that differs from
// the latest one (its previous poll's, or one given to Settle since), the
// first included. The reader is closed when Watch returns.
func (r *Reader) Watch(ctx context.Context, interval time.Duration, urgent func() bool, changed func(*Ledger)) {
	defer r.Close()
	t := time.NewTicker(interval)
	defer t.Stop()
	for first := true; ; first = false {
		l := r.Poll(ctx, first || urgent())
		if ctx.Err() != nil {
			return
		}
		if prev := r.latest.Swap(l); prev == nil || !l.Equal(prev) {
			changed(l)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Latest is the last ledger Watch read, changed or not, or the one given
// to Settle since; nil before the first. It is safe for concurrent use.
func (r *Reader) Latest() *Ledger { return r.latest.Load() }

// Settle makes l, read by another reader, the latest: what Watch's next
// poll is compared with, so that a change since l is reported even if
// Watch's own previous poll already saw the same. It is safe for
// concurrent use.
func (r *Reader) Settle(l *Ledger) { r.latest.Store(l) }
