package watch

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/rtnl"
)

// LinkEvent is the new state of a network link.
type LinkEvent struct {
	Name  string
	Index int
	// OperState is the kernel's RFC 2863 state as ip and sysfs name it:
	// "up", "down", "lowerlayerdown", "dormant", "testing", "notpresent"
	// or "unknown".
	OperState string
	// Up is the administrative state, IFF_UP.
	Up bool
	// Deleted says the link is gone, or was renamed away from Name; such
	// an event has only Name and Index.
	Deleted bool
}

// LinkWatcher reports changes of the links of one network namespace.
//
// It keeps the namespace's link table, so it reports only changes of a
// link's name, operational or administrative state (not of its MTU,
// addresses or counters), and when the kernel drops notifications because
// the socket overflowed, it dumps the table again and reports what
// changed meanwhile, deletions included.
type LinkWatcher struct {
	conn  *netlinkConn
	buf   []byte
	links linkTable
	// stale says notifications were lost or a dump was interrupted: the
	// table must be dumped again.
	stale bool
}

// WatchLinks subscribes to the link notifications of the network
// namespace at netnsPath ("" means the caller's) and reads its current
// links, which it does not report. Run reports every change from then on.
func WatchLinks(netnsPath string) (*LinkWatcher, error) {
	conn, err := dialNetlink(netnsPath, unix.NETLINK_ROUTE, 1<<(unix.RTNLGRP_LINK-1))
	if err != nil {
		return nil, fmt.Errorf("watch links in %q: %w", netnsPath, err)
	}
	w := &LinkWatcher{conn: conn, buf: make([]byte, 1<<16), links: linkTable{byIndex: map[int]LinkEvent{}}}
	if err := w.startDump(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("watch links in %q: %w", netnsPath, err)
	}
	for w.links.dumping() {
		if err := w.receive(func(LinkEvent) {}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("watch links in %q: %w", netnsPath, err)
		}
	}
	return w, nil
}

// Run sends link changes to out until ctx is done, keeping only the latest
// event per link name while out is not ready. It closes the subscription
// when it returns, so a LinkWatcher runs once.
func (w *LinkWatcher) Run(ctx context.Context, out chan<- LinkEvent) error {
	return pump(ctx, w.conn, out, func(put func(string, LinkEvent)) error {
		emit := func(ev LinkEvent) { put(ev.Name, ev) }
		for {
			if err := w.receive(emit); err != nil {
				return err
			}
		}
	})
}

// Close releases the subscription of a LinkWatcher that is not run.
func (w *LinkWatcher) Close() error { return w.conn.Close() }

// receive reads and handles one datagram, then resynchronises if
// notifications were lost.
func (w *LinkWatcher) receive(emit func(LinkEvent)) error {
	n, err := w.conn.recv(w.buf, true)
	switch {
	case errors.Is(err, unix.ENOBUFS):
		w.stale = true
	case err != nil:
		return fmt.Errorf("read link notifications: %w", err)
	default:
		if err := w.handle(w.buf[:n], emit); err != nil {
			return err
		}
	}
	if w.stale && !w.links.dumping() {
		return w.resync(emit)
	}
	return nil
}

// resync handles what is queued, then dumps the links. The queued
// notifications predate the lost ones; only once they are out of the way
// does every link heard of during the dump surely exist.
func (w *LinkWatcher) resync(emit func(LinkEvent)) error {
	for {
		n, err := w.conn.recv(w.buf, false)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if errors.Is(err, unix.ENOBUFS) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read link notifications: %w", err)
		}
		if err := w.handle(w.buf[:n], emit); err != nil {
			return err
		}
	}
	w.stale = false
	return w.startDump()
}

func (w *LinkWatcher) startDump() error {
	req := rtnl.LinkDumpRequest()
	if err := w.conn.send(req.Serialize()); err != nil {
		return fmt.Errorf("dump links: %w", err)
	}
	w.links.startDump()
	return nil
}

// handle applies the messages of one datagram: notifications and dump
// replies alike.
func (w *LinkWatcher) handle(b []byte, emit func(LinkEvent)) error {
	msgs, err := syscall.ParseNetlinkMessage(b)
	if err != nil {
		return fmt.Errorf("parse link notifications: %w", err)
	}
	for i := range msgs {
		m := &msgs[i]
		if m.Header.Flags&unix.NLM_F_DUMP_INTR != 0 {
			w.stale = true
		}
		switch m.Header.Type {
		case unix.RTM_NEWLINK, unix.RTM_DELLINK:
			if ev, ok := parseLinkMessage(m); ok {
				w.links.apply(ev, emit)
			}
		case unix.NLMSG_DONE:
			w.links.endDump(!w.stale, emit)
		case unix.NLMSG_ERROR:
			if len(m.Data) >= 4 && binary.NativeEndian.Uint32(m.Data) != 0 {
				return fmt.Errorf("dump links: %w", syscall.Errno(-int32(binary.NativeEndian.Uint32(m.Data))))
			}
		}
	}
	return nil
}

// parseLinkMessage reads a RTM_NEWLINK or RTM_DELLINK message; ok is false
// when it is malformed or names no link.
func parseLinkMessage(m *syscall.NetlinkMessage) (ev LinkEvent, ok bool) {
	l, ok := rtnl.ParseLink(m.Data)
	if !ok {
		return ev, false
	}
	return LinkEvent{Name: l.Name, Index: l.Index, OperState: l.OperState, Up: l.Up, Deleted: m.Header.Type == unix.RTM_DELLINK}, true
}

// linkTable is the state of a namespace's links, by ifindex.
type linkTable struct {
	byIndex map[int]LinkEvent
	// seen holds the links heard of since the running dump began; nil
	// when no dump runs.
	seen map[int]bool
}

func (t *linkTable) dumping() bool { return t.seen != nil }

func (t *linkTable) startDump() { t.seen = map[int]bool{} }

// endDump ends a dump. When complete, the dump (and the notifications that
// came with it) listed every link, so a link it missed was deleted while
// notifications were lost.
func (t *linkTable) endDump(complete bool, emit func(LinkEvent)) {
	if complete {
		for index, l := range t.byIndex {
			if !t.seen[index] {
				delete(t.byIndex, index)
				emit(LinkEvent{Name: l.Name, Index: index, Deleted: true})
			}
		}
	}
	t.seen = nil
}

// apply records a link's new state and emits what changed.
func (t *linkTable) apply(ev LinkEvent, emit func(LinkEvent)) {
	old, known := t.byIndex[ev.Index]
	if ev.Deleted {
		delete(t.byIndex, ev.Index)
		delete(t.seen, ev.Index)
		emit(LinkEvent{Name: ev.Name, Index: ev.Index, Deleted: true})
		return
	}
	if t.seen != nil {
		t.seen[ev.Index] = true
	}
	t.byIndex[ev.Index] = ev
	if known && old.Name != ev.Name {
		emit(LinkEvent{Name: old.Name, Index: old.Index, Deleted: true})
	}
	if !known || old != ev {
		emit(ev)
	}
}
