package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// UEvent is a kernel uevent of a PCI function or a network interface.
type UEvent struct {
	// Action is "add", "remove", "bind", "unbind", "change" or "move".
	Action string
	// DevPath is the device's path below the sysfs root, e.g.
	// "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0".
	DevPath string
	// Subsystem is "pci" or "net".
	Subsystem string
	SeqNum    uint64
	// Driver is DRIVER: the driver bound, on a pci bind.
	Driver string
	// PCISlot is PCI_SLOT_NAME, the PCI address, on pci events.
	PCISlot string
	// Interface is INTERFACE, the netdev's name, on net events.
	Interface string
	// Overflow marks a stand-in for events the kernel dropped because
	// they came faster than they were read; its other fields are empty.
	// Whatever the consumer derives from uevents needs a fresh look.
	Overflow bool
}

// parseUEvent reads a kernel uevent message: "ACTION@DEVPATH", then
// NUL-separated KEY=VALUE fields, which repeat ACTION and DEVPATH.
func parseUEvent(msg []byte) (UEvent, error) {
	header, rest, _ := bytes.Cut(msg, []byte{0})
	action, devpath, ok := strings.Cut(string(header), "@")
	if !ok || action == "" || !strings.HasPrefix(devpath, "/") {
		return UEvent{}, fmt.Errorf("uevent header %q: want ACTION@/DEVPATH", header)
	}
	ev := UEvent{Action: action, DevPath: devpath}
	for field := range bytes.SplitSeq(rest, []byte{0}) {
		if len(field) == 0 {
			continue
		}
		if err := ev.set(string(field)); err != nil {
			return UEvent{}, fmt.Errorf("uevent %s: %w", header, err)
		}
	}
	if ev.Subsystem == "" {
		return UEvent{}, fmt.Errorf("uevent %s: no SUBSYSTEM", header)
	}
	return ev, nil
}

// set takes one KEY=VALUE field.
func (ev *UEvent) set(field string) error {
	key, value, ok := strings.Cut(field, "=")
	if !ok || key == "" {
		return fmt.Errorf("field %q: want KEY=VALUE", field)
	}
	switch key {
	case "ACTION":
		return sameAsHeader(key, value, ev.Action)
	case "DEVPATH":
		return sameAsHeader(key, value, ev.DevPath)
	case "SUBSYSTEM":
		ev.Subsystem = value
	case "SEQNUM":
		n, err := strconv.ParseUint(value, 10, 64)
		if err != nil {
			return fmt.Errorf("SEQNUM %q: not a number", value)
		}
		ev.SeqNum = n
	case "DRIVER":
		ev.Driver = value
	case "PCI_SLOT_NAME":
		ev.PCISlot = value
	case "INTERFACE":
		ev.Interface = value
	}
	return nil
}

func sameAsHeader(key, value, header string) error {
	if value != header {
		return fmt.Errorf("%s %q differs from the header's %q", key, value, header)
	}
	return nil
}

// watched reports whether the agent cares about ev: a change of what PCI
// functions there are, which driver they have, or which netdevs.
func (ev *UEvent) watched() bool {
	switch ev.Action {
	case "add", "remove", "bind", "unbind", "change", "move":
		return ev.Subsystem == "pci" || ev.Subsystem == "net"
	}
	return false
}

// UEventWatcher reports the kernel's uevents of PCI functions and netdevs.
type UEventWatcher struct {
	conn *netlinkConn
}

// ueventKernelGroup is the multicast group of uevents as the kernel sends
// them; udev rebroadcasts them, after its rules ran, on group 2.
const ueventKernelGroup = 1

// WatchUEvents subscribes to kernel uevents in the network namespace at
// netnsPath ("" means the caller's). Netdev uevents reach only the
// namespace the netdev is in; PCI uevents reach every namespace of the
// initial user namespace. Subscribing fails where the kernel has no
// uevent socket for the namespace.
//
// Uevents that a process broadcasts on the kernel's group count as the
// kernel's own: only a process with CAP_NET_ADMIN over the namespace may
// send there, and a uevent only makes the agent look at sysfs again. A
// virtual node announces the changes of its generated tree that way,
// which the kernel knows nothing about.
func WatchUEvents(netnsPath string) (*UEventWatcher, error) {
	conn, err := dialNetlink(netnsPath, unix.NETLINK_KOBJECT_UEVENT, ueventKernelGroup)
	if err != nil {
		return nil, fmt.Errorf("watch uevents in %q: %w", netnsPath, err)
	}
	conn.anySender = true
	return &UEventWatcher{conn: conn}, nil
}

// Run sends the pci and net subsystems' add, remove, bind, unbind, change
// and move uevents to out until ctx is done, keeping only the latest event
// per device path while out is not ready. It closes the subscription when
// it returns, so a UEventWatcher runs once.
func (w *UEventWatcher) Run(ctx context.Context, out chan<- UEvent) error {
	return pump(ctx, w.conn, out, func(put func(string, UEvent)) error {
		buf := make([]byte, 1<<14)
		for {
			n, err := w.conn.recv(buf, true)
			if errors.Is(err, unix.ENOBUFS) {
				put("", UEvent{Overflow: true})
				continue
			}
			if err != nil {
				return fmt.Errorf("read uevents: %w", err)
			}
			// A kernel message that does not parse says nothing the agent
			// can act on; the ones around it still count.
			if ev, err := parseUEvent(buf[:n]); err == nil && ev.watched() {
				put(ev.DevPath, ev)
			}
		}
	})
}
