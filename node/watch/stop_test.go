package watch

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestRunStopsEverything runs each source until its context ends and
// expects Run to return nil and leave no goroutine behind: the agent
// starts and stops them as its config changes.
func TestRunStopsEverything(t *testing.T) {
	tests := []struct {
		name string
		// run makes the source and runs it until ctx is done.
		run func(t *testing.T, ctx context.Context) error
	}{{
		name: "links",
		run: func(t *testing.T, ctx context.Context) error {
			path, _ := newNetns(t)
			w, err := WatchLinks(path)
			if err != nil {
				t.Fatal(err)
			}
			return w.Run(ctx, make(chan LinkEvent))
		},
	}, {
		name: "uevents",
		run: func(t *testing.T, ctx context.Context) error {
			path, _ := newNetns(t)
			w, err := WatchUEvents(path)
			if err != nil {
				t.Fatal(err)
			}
			return w.Run(ctx, make(chan UEvent))
		},
	}, {
		name: "file",
		run: func(t *testing.T, ctx context.Context) error {
			w, err := WatchFile(filepath.Join(t.TempDir(), "config.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			return w.Run(ctx, make(chan struct{}))
		},
	}, {
		name: "sockets",
		run: func(t *testing.T, ctx context.Context) error {
			w, err := WatchSockets(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return w.Run(ctx, make(chan SocketEvent))
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			if err := tt.run(t, ctx); err != nil {
				t.Errorf("Run: %v", err)
			}
			deadline := time.Now().Add(eventTimeout)
			for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if n := runtime.NumGoroutine(); n > before {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines after Run, %d before:\n%s", n, before, buf[:runtime.Stack(buf, true)])
			}
		})
	}
}
