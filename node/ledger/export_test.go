package ledger

import "time"

// SetClock makes r measure Poll's intervals on now.
func SetClock(r *Reader, now func() time.Time) { r.now = now }

// SetBookClock makes b take its holds' times, and its reads', on now.
func SetBookClock(b *Book, now func() time.Time) {
	b.now = now
	b.reader.now = now
}

// NudgeGap is the least time between two polls nudges start.
const NudgeGap = nudgeGap
