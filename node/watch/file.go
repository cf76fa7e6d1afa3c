package watch

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"
)

// fileSettle is how long a burst of changes to a watched file lasts and
// still counts as one change: an editor writes, renames and chmods in
// quick succession, and a ConfigMap update swaps several links.
const fileSettle = 50 * time.Millisecond

// configMapData is the link a Kubernetes ConfigMap or Secret volume swaps
// atomically on update; the file itself is a link through it and does
// not change.
const configMapData = "..data"

// FileWatcher reports changes of one file, such as the agent's config.
// It watches the file's directory, not the file: editors replace a file
// by renaming another over it, ConfigMap volumes swap a link, and the
// file may not exist yet. If the directory does not exist either, it
// waits for it to appear.
type FileWatcher struct {
	dir  *dirWatch
	name string
}

// WatchFile starts watching the file at path.
func WatchFile(path string) (*FileWatcher, error) {
	d, err := newDirWatch(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("watch file %s: %w", path, err)
	}
	return &FileWatcher{dir: d, name: filepath.Base(path)}, nil
}

// Run sends to out after the file was created, written, replaced, removed
// or, in a ConfigMap volume, updated, until ctx is done. A burst of such
// changes makes one send, 50 ms after its first change; while out is not
// ready, changes make at most one more. Run closes the watch when it
// returns, so a FileWatcher runs once.
func (w *FileWatcher) Run(ctx context.Context, out chan<- struct{}) error {
	return pump(ctx, w.dir, out, func(put func(struct{}, struct{})) error {
		burst := newBurst(fileSettle, func() { put(struct{}{}, struct{}{}) })
		defer burst.stop()
		onEntry := func(ev fileEvent) {
			if name := filepath.Base(ev.Path); name == w.name || name == configMapData {
				burst.add()
			}
		}
		onReset := func() error {
			burst.add()
			return nil
		}
		// run returns only on an error.
		return fmt.Errorf("watch file %s: %w", filepath.Join(w.dir.dir, w.name), w.dir.run(onEntry, onReset))
	})
}

// Close releases the watch of a FileWatcher that is not run.
func (w *FileWatcher) Close() error { return w.dir.Close() }

// burst calls fire once, a fixed time after the first of a burst of
// adds, so that a burst costs one call and a steady stream of changes
// still gets one call per period.
type burst struct {
	window  time.Duration
	timer   *time.Timer
	mu      sync.Mutex
	pending bool
}

func newBurst(window time.Duration, fire func()) *burst {
	b := &burst{window: window}
	b.timer = time.AfterFunc(window, func() {
		b.mu.Lock()
		b.pending = false
		b.mu.Unlock()
		fire()
	})
	b.timer.Stop()
	return b
}

func (b *burst) add() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.pending {
		b.pending = true
		b.timer.Reset(b.window)
	}
}

func (b *burst) stop() { b.timer.Stop() }
