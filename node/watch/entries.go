package watch

import (
	"context"
	"sync"
)

// Entries names a directory to watch with WatchEntries and the entries
// followed there; a nil Match takes every entry.
type Entries struct {
	Dir   string
	Match func(name string) bool
}

// WatchAll watches each directory as WatchEntries does, sending to out,
// until ctx ends or one of the watches ends (ErrEventOverflow is not an
// end: the watch reports every entry then), which ends them all. The
// returned channel is closed once they have ended. It makes all of them or
// none: the error is the first watch it could not make.
func WatchAll(ctx context.Context, dirs []Entries, out chan<- SocketEvent, onEnd func(dir string, err error)) (<-chan struct{}, error) {
	watchers := make([]*SocketWatcher, 0, len(dirs))
	for _, d := range dirs {
		w, err := WatchEntries(d.Dir, d.Match)
		if err != nil {
			for _, made := range watchers {
				_ = made.Close() // never run: closing it frees its inotify instance
			}
			return nil, err
		}
		watchers = append(watchers, w)
	}
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, w := range watchers {
		wg.Go(func() {
			defer cancel()
			if err := w.Run(wctx, out); err != nil && onEnd != nil {
				onEnd(dirs[i].Dir, err)
			}
		})
	}
	ended := make(chan struct{})
	go func() { wg.Wait(); cancel(); close(ended) }()
	return ended, nil
}
