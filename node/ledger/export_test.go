package ledger

import "time"

// SetClock makes r measure Poll's intervals on now.
func SetClock(r *Reader, now func() time.Time) { r.now = now }
