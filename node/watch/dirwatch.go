package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// dirWatch keeps an inotify watch on a directory that may not exist yet,
// or may go and come back: while it is missing, it watches the nearest
// ancestor that exists and moves down as the path appears.
type dirWatch struct {
	dir     string
	w       *inotify
	watched string // dir, or its nearest existing ancestor
}

func newDirWatch(dir string) (*dirWatch, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	w, err := newInotify()
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
		_ = d.w.remove(d.watched)
		d.watched = ""
	}
	for p := d.dir; ; p = filepath.Dir(p) {
		err := d.w.add(p)
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
// Reading here, not on a goroutine of the watch's own, keeps a watch to
// the goroutine that runs it.
func (d *dirWatch) run(onEntry func(fileEvent), onReset func() error) error {
	for {
		evs, err := d.w.read()
		if closedRead(err) {
			return errors.New("inotify watcher closed")
		}
		if err != nil {
			return fmt.Errorf("watch %s: %w", d.dir, err)
		}
		for _, ev := range evs {
			if err := d.handle(ev, onEntry, onReset); err != nil {
				return err
			}
		}
	}
}

func (d *dirWatch) handle(ev fileEvent, onEntry func(fileEvent), onReset func() error) error {
	if ev.Overflow {
		return onReset()
	}
	wasPresent := d.present()
	gone := ev.Path == d.watched && ev.Op&(opRemove|opRename) != 0
	if wasPresent && !gone {
		if filepath.Dir(ev.Path) == d.dir {
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
