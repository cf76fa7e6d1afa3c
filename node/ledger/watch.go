package ledger

import (
	"context"
	"time"
)

// Watch reads the ledger every interval until ctx ends and calls changed
// with every ledger that differs from the one before, the first included.
// Kubelet says nothing when a pod's allocation ends, so the holds are
// polled; a read costs one PodResources List and a few stats. The reader
// is closed when Watch returns.
func (r *Reader) Watch(ctx context.Context, interval time.Duration, changed func(*Ledger)) {
	defer r.Close()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last *Ledger
	for {
		l := r.Read(ctx)
		if ctx.Err() != nil {
			return
		}
		r.latest.Store(l)
		if last == nil || !l.Equal(last) {
			last = l
			changed(l)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Latest is the last ledger Watch read, changed or not, nil before the
// first; it is safe for concurrent use.
func (r *Reader) Latest() *Ledger { return r.latest.Load() }
