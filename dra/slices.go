package dra

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// sliceSender gives the publisher the latest devices in one goroutine,
// so that Publish never waits for the API server (the first sync lists
// the slices an earlier agent left). One sender, always sending the
// latest devices, also keeps a republish from writing an older list
// after a newer one.
type sliceSender struct {
	log *slog.Logger
	// kick wakes the goroutine; sends meanwhile are one send.
	kick chan struct{}
	mu   sync.Mutex
	// latest is the layout the last Publish made, for every sync after
	// it: a republish or a repair compares the same devices made again.
	// It holds no ResourceSlice device: at thousands of VFs they are
	// megabytes, each slice's made and dropped in turn.
	latest *layout
}

func newSliceSender(log *slog.Logger) *sliceSender {
	return &sliceSender{log: log, kick: make(chan struct{}, 1)}
}

// send makes l the latest devices or, with nil, asks for the latest
// again, and wakes the goroutine.
func (s *sliceSender) send(l *layout) {
	if l != nil {
		s.mu.Lock()
		s.latest = l
		s.mu.Unlock()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// next is the devices to write; nil before the first send.
func (s *sliceSender) next() *layout {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.latest
}

// run publishes the latest devices each time send wakes it, retries a
// failed sync with a backoff, and writes again the slices the watch saw
// someone else change, until ctx ends; the channel closes when it has.
func (s *sliceSender) run(ctx context.Context, p *publisher, published func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l := &sendLoop{s: s, p: p, backoff: retryBackoff(), published: published}
		for l.wait(ctx) {
			l.once(ctx)
		}
	}()
	return done
}

// retryBackoff spaces the syncs after failed ones (an API server away,
// a refused write): 100 ms, doubling up to 30 s.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}
}

// sendLoop is the sender's goroutine's state.
type sendLoop struct {
	s       *sliceSender
	p       *publisher
	backoff wait.Backoff
	// retry fires when a failed sync is due again; nil when none failed.
	retry *time.Timer
	// check: a send or a retry asks for a sync, even if the watch saw
	// nothing.
	check bool
	// published is called after the first sync that wrote the slices,
	// then dropped (Options.Published).
	published func()
}

// wait blocks until a send, a retry or the watch wakes the loop; false
// once ctx ended.
func (l *sendLoop) wait(ctx context.Context) bool {
	var retry <-chan time.Time
	if l.retry != nil {
		retry = l.retry.C
	}
	select {
	case <-ctx.Done():
		return false
	case <-l.s.kick:
		l.check = true
	case <-retry:
		l.retry, l.check = nil, true
	case <-l.p.wake:
	}
	return true
}

// once syncs the latest devices if a send or a retry asked for it or the
// watch saw someone else's write; nothing before the first send.
func (l *sendLoop) once(ctx context.Context) {
	if !l.p.absorb() && !l.check {
		return
	}
	l.check = false
	res := l.s.next()
	if res == nil {
		return
	}
	if err := l.p.sync(ctx, res); err != nil {
		if ctx.Err() != nil {
			return // stopping: the sync was cut short, not refused
		}
		l.s.log.Error("DRA devices not published", "err", err)
		if l.retry == nil {
			l.retry = time.NewTimer(l.backoff.Step())
		}
		return
	}
	if l.retry != nil {
		l.retry.Stop()
		l.retry = nil
	}
	l.backoff = retryBackoff()
	if l.published != nil {
		l.published()
		l.published = nil
	}
}
