package dra

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// sliceSender gives the library the latest devices from one goroutine.
// The library's first PublishResources blocks until its ResourceSlice
// informer synced, checking once a second; sent from here, that second
// delays no front end. One sender, always sending the latest devices,
// also keeps a republish from giving the library an older list after a
// newer one.
type sliceSender struct {
	log *slog.Logger
	// kick wakes the goroutine; sends meanwhile are one send.
	kick chan struct{}
	mu   sync.Mutex
	// latest is what the last Publish made, nil before the first.
	latest *resourceslice.DriverResources
}

func newSliceSender(log *slog.Logger) *sliceSender {
	return &sliceSender{log: log, kick: make(chan struct{}, 1)}
}

// send makes res the latest devices, or, with nil, asks for the latest
// again, and wakes the goroutine.
func (s *sliceSender) send(res *resourceslice.DriverResources) {
	if res != nil {
		s.mu.Lock()
		s.latest = res
		s.mu.Unlock()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run gives h the latest devices each time send wakes it, until ctx
// ends; the channel closes when it has.
func (s *sliceSender) run(ctx context.Context, h *kubeletplugin.Helper) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.kick:
			}
			s.mu.Lock()
			res := s.latest
			s.mu.Unlock()
			if res == nil {
				continue
			}
			if err := h.PublishResources(ctx, *res); err != nil {
				s.log.Error("DRA devices not published", "err", err)
			}
		}
	}()
	return done
}
