package ledger

import (
	"context"
	"time"
)

// SetClock makes r measure Poll's intervals on now.
func SetClock(r *Reader, now func() time.Time) { r.now = now }

// SetBookClock makes b take its holds' times, and its reads', on now.
func SetBookClock(b *Book, now func() time.Time) {
	b.now = now
	b.reader.now = now
}

// NudgeGap is the least time between two polls nudges start.
const NudgeGap = nudgeGap

// WatchReader is a reader such as b's Watch polls with.
func WatchReader(b *Book) *Reader { return b.newWatchReader() }

// PollWatch is one poll of b's Watch with its reader r.
func PollWatch(ctx context.Context, b *Book, r *Reader, urgent bool) *Ledger {
	r.follow(b.sourcedNow())
	l := r.Poll(ctx, urgent)
	b.Apply(ctx, l)
	return l
}

// FollowBook has r follow b's newest read, as Watch does before a poll.
func FollowBook(r *Reader, b *Book) { r.follow(b.sourcedNow()) }

// ReportChanged is the report of a publish that changed b's snapshot,
// made as late as one can come: after a newer publish's.
func ReportChanged(b *Book) { b.changed(true) }

// AwaitsEnd says whether b's Watch, polling with r, asks kubelet at every
// poll for a pod's end.
func AwaitsEnd(b *Book, r *Reader) bool { return r.awaitsEnd(b.lastPodEnd()) }
