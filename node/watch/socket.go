package watch

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SocketEvent says an entry of a watched directory was created or removed
// or, from WatchEntries, written.
type SocketEvent struct {
	// Name is the entry's name in the directory, e.g. "kubelet.sock".
	Name    string
	Removed bool
	Written bool
}

// SocketWatcher reports entries created in and removed from a directory,
// such as kubelet's device-plugins directory: a restarting kubelet
// removes every socket there and creates kubelet.sock anew, and each
// device plugin must then serve its socket again and re-register. If the
// directory does not exist, it waits for it to appear.
type SocketWatcher struct {
	dir   *dirWatch
	match func(name string) bool
	// present holds the matching entries known to exist.
	present map[string]bool
	// writes reports writes to existing entries too.
	writes bool
}

// WatchSockets starts watching the entries of dir whose names match; a
// nil match takes every entry. Entries that exist already are not
// reported.
func WatchSockets(dir string, match func(name string) bool) (*SocketWatcher, error) {
	d, err := newDirWatch(dir)
	if err != nil {
		return nil, fmt.Errorf("watch sockets in %s: %w", dir, err)
	}
	if match == nil {
		match = func(string) bool { return true }
	}
	w := &SocketWatcher{dir: d, match: match}
	if w.present, err = w.list(); err != nil {
		d.Close()
		return nil, fmt.Errorf("watch sockets in %s: %w", dir, err)
	}
	return w, nil
}

// WatchEntries is WatchSockets that also reports writes to the matching
// entries, such as configuration files edited in place: a reader needs no
// periodic re-read to catch them.
func WatchEntries(dir string, match func(name string) bool) (*SocketWatcher, error) {
	w, err := WatchSockets(dir, match)
	if err != nil {
		return nil, err
	}
	w.writes = true
	return w, nil
}

// Visible reports whether an entry's name is not hidden. Writers that
// replace a file atomically (package atomicfile, the device-info files)
// write a hidden temporary and rename it over the file, which
// WatchEntries reports as the file written: the temporary's own events
// say nothing a reader of the file needs, and were most of the events
// of the directories the agent writes to, each waking whoever watches
// them.
func Visible(name string) bool { return !strings.HasPrefix(name, ".") }

// Close closes a watch that will not Run.
func (w *SocketWatcher) Close() error { return w.dir.Close() }

// Run sends the creation and removal of matching entries to out until ctx
// is done, keeping only the latest event per name while out is not ready.
// When the directory appears or goes, or the kernel dropped events, it
// reports every matching entry as created, since any may have been
// replaced unseen, and every one gone as removed. Run closes the watch
// when it returns, so a SocketWatcher runs once.
func (w *SocketWatcher) Run(ctx context.Context, out chan<- SocketEvent) error {
	return pump(ctx, w.dir, out, func(put func(string, SocketEvent)) error {
		emit := func(ev SocketEvent) { put(ev.Name, ev) }
		onEntry := func(ev fileEvent) { w.entry(ev, emit) }
		onReset := func() error { return w.rescan(emit) }
		// run returns only on an error.
		return fmt.Errorf("watch sockets in %s: %w", w.dir.dir, w.dir.run(onEntry, onReset))
	})
}

// entry reports an entry's creation or removal. It reports only changes of
// what is known to exist: a rescan may have seen an entry whose event was
// still on its way.
func (w *SocketWatcher) entry(ev fileEvent, emit func(SocketEvent)) {
	name := filepath.Base(ev.Path)
	if !w.match(name) {
		return
	}
	switch {
	case ev.Op&opCreate != 0 && !w.present[name]:
		w.present[name] = true
		emit(SocketEvent{Name: name})
	case ev.Op&(opRemove|opRename) != 0 && w.present[name]:
		delete(w.present, name)
		emit(SocketEvent{Name: name, Removed: true})
	case w.writes && ev.Op&(opWrite|opCreate) != 0 && w.present[name]:
		// A create of an entry that exists is a file renamed over it.
		emit(SocketEvent{Name: name, Written: true})
	}
}

func (w *SocketWatcher) rescan(emit func(SocketEvent)) error {
	now, err := w.list()
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(w.present)) {
		if !now[name] {
			emit(SocketEvent{Name: name, Removed: true})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(now)) {
		emit(SocketEvent{Name: name})
	}
	w.present = now
	return nil
}

// list returns the matching entries of the directory; none if it is
// missing.
func (w *SocketWatcher) list() (map[string]bool, error) {
	entries, err := os.ReadDir(w.dir.dir)
	if err != nil && !missing(err) {
		return nil, err
	}
	names := map[string]bool{}
	for _, e := range entries {
		if w.match(e.Name()) {
			names[e.Name()] = true
		}
	}
	return names, nil
}
