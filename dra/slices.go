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
	// pending is what the last Publish made until the library took it;
	// rebuild makes it again for a republish. The library keeps a copy
	// of its own, and a second one held here would cost megabytes at
	// thousands of VFs for as long as the devices stay as they are.
	pending *resourceslice.DriverResources
	rebuild func() resourceslice.DriverResources
}

func newSliceSender(log *slog.Logger) *sliceSender {
	return &sliceSender{log: log, kick: make(chan struct{}, 1)}
}

// send makes res the latest devices, which rebuild makes again, or, with
// nil, asks for the latest again, and wakes the goroutine.
func (s *sliceSender) send(res *resourceslice.DriverResources, rebuild func() resourceslice.DriverResources) {
	if res != nil {
		s.mu.Lock()
		s.pending, s.rebuild = res, rebuild
		s.mu.Unlock()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// next is the devices to give the library: the pending ones, else the
// last ones made again; nil before the first send.
func (s *sliceSender) next() *resourceslice.DriverResources {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == nil && s.rebuild != nil {
		res := s.rebuild()
		s.pending = &res
	}
	return s.pending
}

// taken drops res, once the library has it, unless a newer send came.
func (s *sliceSender) taken(res *resourceslice.DriverResources) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pending == res {
		s.pending = nil
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
			res := s.next()
			if res == nil {
				continue
			}
			if err := h.PublishResources(ctx, *res); err != nil {
				s.log.Error("DRA devices not published", "err", err)
				continue
			}
			s.taken(res)
		}
	}()
	return done
}
