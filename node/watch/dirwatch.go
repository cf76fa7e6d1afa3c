package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fsnotify/fsnotify"
)

// dirWatch keeps an inotify watch on a directory that may not exist yet,
// or may go and come back: while it is missing, it watches the nearest
// ancestor that exists and moves down as the path appears.
type dirWatch struct {
	dir     string
	w       *fsnotify.Watcher
	watched string // dir, or its nearest existing ancestor
}

func newDirWatch(dir string) (*dirWatch, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	d := &dirWatch{dir: abs, w: w}
	if err := d.arm(); err != nil {
		w.Close()
		return nil, err
	}
	return d, nil
}

func (d *dirWatch) Close() error { return d.w.Close() }

// present reports whether dir itself is watched.
func (d *dirWatch) present() bool { return d.watched == d.dir }

// arm watches dir or, while it is missing, its nearest existing ancestor.
func (d *dirWatch) arm() error {
	if d.watched != "" {
		// The kernel drops the watch of a deleted directory by itself.
		_ = d.w.Remove(d.watched)
		d.watched = ""
	}
	for p := d.dir; ; p = filepath.Dir(p) {
		err := d.w.Add(p)
		if err == nil {
			d.watched = p
			if p != d.dir && d.childAppeared() {
				return d.arm()
			}
			return nil
		}
		if !missing(err) || p == filepath.Dir(p) {
			return fmt.Errorf("watch %s: %w", p, err)
		}
	}
}

// missing reports whether err says a path or one of its parents is not
// a directory that exists.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// childAppeared reports whether the directory below the watched ancestor,
// on the way to dir, was made before the watch began, so that no event
// will say so.
func (d *dirWatch) childAppeared() bool {
	rel := strings.TrimPrefix(strings.TrimPrefix(d.dir, d.watched), "/")
	first, _, _ := strings.Cut(rel, "/")
	fi, err := os.Stat(filepath.Join(d.watched, first))
	return err == nil && fi.IsDir()
}

// run reads events until the watcher is closed. It calls onEntry for each
// event on an entry of dir, and onReset whenever dir's entries may have
// changed unseen: dir appeared or went, or the kernel dropped events.
func (d *dirWatch) run(onEntry func(fsnotify.Event), onReset func() error) error {
	for {
		select {
		case ev, ok := <-d.w.Events:
			if !ok {
				return errors.New("inotify watcher closed")
			}
			if err := d.handle(ev, onEntry, onReset); err != nil {
				return err
			}
		case err, ok := <-d.w.Errors:
			if !ok {
				return errors.New("inotify watcher closed")
			}
			if !errors.Is(err, fsnotify.ErrEventOverflow) {
				return fmt.Errorf("watch %s: %w", d.dir, err)
			}
			if err := onReset(); err != nil {
				return err
			}
		}
	}
}

func (d *dirWatch) handle(ev fsnotify.Event, onEntry func(fsnotify.Event), onReset func() error) error {
	wasPresent := d.present()
	gone := ev.Name == d.watched && ev.Op&(fsnotify.Remove|fsnotify.Rename) != 0
	if wasPresent && !gone {
		if filepath.Dir(ev.Name) == d.dir {
			onEntry(ev)
		}
		return nil
	}
	// dir went, or something changed in the ancestor watched instead.
	if err := d.arm(); err != nil {
		return err
	}
	if wasPresent || d.present() {
		return onReset()
	}
	return nil
}
