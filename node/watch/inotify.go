package watch

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// inotify is one inotify instance, read through Go's poller into a
// small buffer on the heap by whoever calls read. fsnotify, which the
// watches used before, reads into a 64 KiB array on the stack of a
// goroutine of its own: 128-264 KiB of stack for each watch, as long as
// it lasts (TestWatchStack), where an agent keeps a dozen.
type inotify struct {
	f   *os.File
	buf []byte
	// paths names each watch descriptor's path: an event says only the
	// descriptor, and an entry's name within it.
	paths map[int32]string
}

// fileOp is what an event says happened to the path it names; an event
// may say several.
type fileOp uint8

const (
	opCreate fileOp = 1 << iota // made, or moved in
	opWrite                     // written
	opRemove                    // deleted
	opRename                    // moved away
	opChmod                     // its attributes changed
)

// fileEvent is one inotify event: Path is the watched path itself or an
// entry in it, Overflow says the kernel dropped events.
type fileEvent struct {
	Path     string
	Op       fileOp
	Overflow bool
}

// inotifyMask is every change of a watched directory, its entries and
// itself that a watch reports.
const inotifyMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM | unix.IN_MODIFY |
	unix.IN_ATTRIB | unix.IN_DELETE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// inotifyBuffer holds a read's events: at least one with the longest
// name (16 bytes and NAME_MAX+1), and a few dozen typical ones.
const inotifyBuffer = 4096

func newInotify() (*inotify, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	// A non-blocking descriptor is read through the poller, and Close
	// ends a read that waits.
	f := os.NewFile(uintptr(fd), "inotify")
	return &inotify{f: f, buf: make([]byte, inotifyBuffer), paths: map[int32]string{}}, nil
}

// add watches path; it reports fs.ErrNotExist or ENOTDIR as the kernel
// does for a path that is missing.
func (n *inotify) add(path string) error {
	return n.control(func(fd int) error {
		wd, err := unix.InotifyAddWatch(fd, path, inotifyMask|unix.IN_ONLYDIR)
		if err != nil {
			return &os.PathError{Op: "inotify_add_watch", Path: path, Err: err}
		}
		n.paths[int32(wd)] = path
		return nil
	})
}

// remove stops watching path, if it is watched.
func (n *inotify) remove(path string) error {
	for wd, p := range n.paths {
		if p != path {
			continue
		}
		delete(n.paths, wd)
		return n.control(func(fd int) error {
			// EINVAL: the kernel dropped the watch itself (the path went).
			if _, err := unix.InotifyRmWatch(fd, uint32(wd)); err != nil && !errors.Is(err, unix.EINVAL) {
				return &os.PathError{Op: "inotify_rm_watch", Path: path, Err: err}
			}
			return nil
		})
	}
	return nil
}

// control runs op on the descriptor while it cannot be closed: a watch
// added after Close would go to whatever the number names then.
func (n *inotify) control(op func(fd int) error) error {
	raw, err := n.f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := raw.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// read waits for events and returns them; os.ErrClosed once closed.
func (n *inotify) read() ([]fileEvent, error) {
	for {
		got, err := n.f.Read(n.buf)
		if err != nil {
			return nil, err
		}
		if evs := n.parse(n.buf[:got]); len(evs) > 0 {
			return evs, nil
		}
	}
}

// parse reads the events of one read. A descriptor it no longer knows
// (a watch removed while its events were queued) says nothing.
func (n *inotify) parse(b []byte) []fileEvent {
	var evs []fileEvent
	for len(b) >= unix.SizeofInotifyEvent {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		size := unix.SizeofInotifyEvent + int(binary.NativeEndian.Uint32(b[12:]))
		if size > len(b) {
			break
		}
		// The kernel pads a name with NULs.
		name := string(bytes.TrimRight(b[unix.SizeofInotifyEvent:size], "\x00"))
		b = b[size:]
		if mask&unix.IN_Q_OVERFLOW != 0 {
			evs = append(evs, fileEvent{Overflow: true})
			continue
		}
		path, known := n.paths[wd]
		if mask&unix.IN_IGNORED != 0 {
			delete(n.paths, wd)
		}
		if op := opOf(mask); known && op != 0 {
			if name != "" {
				path = filepath.Join(path, name)
			}
			evs = append(evs, fileEvent{Path: path, Op: op})
		}
	}
	return evs
}

// opOf says what an event's mask tells of its path.
func opOf(mask uint32) fileOp {
	var op fileOp
	for _, m := range []struct {
		bits uint32
		op   fileOp
	}{
		{unix.IN_CREATE | unix.IN_MOVED_TO, opCreate},
		{unix.IN_MODIFY, opWrite},
		{unix.IN_DELETE | unix.IN_DELETE_SELF, opRemove},
		{unix.IN_MOVED_FROM | unix.IN_MOVE_SELF, opRename},
		{unix.IN_ATTRIB, opChmod},
	} {
		if mask&m.bits != 0 {
			op |= m.op
		}
	}
	return op
}

// Close ends the instance and every watch of it, and a read that waits.
func (n *inotify) Close() error { return n.f.Close() }

// closedRead reports whether err is a read's answer after Close.
func closedRead(err error) bool {
	return errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EBADF)
}
