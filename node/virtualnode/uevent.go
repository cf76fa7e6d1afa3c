package virtualnode

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
)

// ueventKernelGroup is the multicast group on which the kernel sends
// uevents (udev rebroadcasts on group 2).
const ueventKernelGroup = 1

// kernelUEvent is one uevent the kernel would send.
type kernelUEvent interface {
	message(seq uint64) []byte
	// about names the device, as an error says it.
	about() string
}

// pciUEvent is one uevent the kernel sends about a PCI function.
type pciUEvent struct {
	action string // add, remove, bind or unbind
	f      *Function
}

// message is the uevent as the kernel writes it: "ACTION@DEVPATH", then
// NUL-terminated KEY=VALUE fields, the function's uevent attribute among
// them. Only bind carries DRIVER: on add no driver is bound yet, and
// unbind and remove come after the kernel let go of it.
func (e pciUEvent) message(seq uint64) []byte {
	devpath := "/" + e.f.SysPath
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s\x00ACTION=%s\x00DEVPATH=%s\x00SUBSYSTEM=pci\x00", e.action, devpath, e.action, devpath)
	for field := range strings.SplitSeq(strings.TrimSuffix(uevent(e.f), "\n"), "\n") {
		if strings.HasPrefix(field, "DRIVER=") && e.action != "bind" {
			continue
		}
		b.WriteString(field + "\x00")
	}
	b.WriteString("SEQNUM=" + strconv.FormatUint(seq, 10) + "\x00")
	return []byte(b.String())
}

func (e pciUEvent) about() string { return e.action + " of " + e.f.Addr }

// sfNetUEvent is the uevent of an SF's netdev coming (add) or going
// (remove) with its SF: the watcher of a real node hears of a new SF so,
// as the auxiliary bus's own uevents are no netdev's. The veth's uevent
// comes before the tree shows the SF; this one after.
type sfNetUEvent struct {
	action string
	sf     *SF
}

func (e sfNetUEvent) message(seq uint64) []byte {
	devpath := "/" + e.sf.SysPath + "/net/" + e.sf.Netdev.Name
	return fmt.Appendf(nil, "%s@%s\x00ACTION=%s\x00DEVPATH=%s\x00SUBSYSTEM=net\x00INTERFACE=%s\x00IFINDEX=%d\x00SEQNUM=%d\x00",
		e.action, devpath, e.action, devpath, e.sf.Netdev.Name, e.sf.Netdev.Index, seq)
}

func (e sfNetUEvent) about() string { return e.action + " of " + e.sf.Name }

// announce broadcasts the uevents in the node's network namespace, on the
// kernel's group of NETLINK_KOBJECT_UEVENT, once the tree shows what they
// announce, as the kernel sends them once sysfs does. A generated tree
// has no kernel behind it, so the node plays that part: what watches
// uevents in the namespace (hwnet-agent) hears of the change through the
// real socket. Netdev uevents the kernel sends itself, for the veths. A
// node without links has no namespace of its own and announces nothing.
func (n *Node) announce(evs []kernelUEvent) error {
	if n.st.Netns == "" || len(evs) == 0 {
		return nil
	}
	fd, err := ueventSocket(n.st.Netns)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	to := &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: ueventKernelGroup}
	for _, e := range evs {
		n.seq++
		if err := unix.Sendto(fd, e.message(n.seq), 0, to); err != nil {
			return fmt.Errorf("send uevent %s: %w", e.about(), err)
		}
	}
	return nil
}

// announced announces the pending uevents of a change that ended with
// err: as far as it went, the tree shows them.
func (n *Node) announced(err error) error {
	evs := n.pending
	n.pending = nil
	return errors.Join(err, n.announce(evs))
}

// ueventSocket opens a NETLINK_KOBJECT_UEVENT socket in the named network
// namespace; it stays there whatever thread uses it.
func ueventSocket(netnsName string) (int, error) {
	var fd int
	err := osthread.Run(func() error {
		ns, err := netns.GetFromName(netnsName)
		if err != nil {
			return err
		}
		defer ns.Close()
		if err := netns.Set(ns); err != nil {
			return err
		}
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_KOBJECT_UEVENT)
		return err
	})
	if err != nil {
		return -1, fmt.Errorf("uevent socket in netns %s: %w", netnsName, err)
	}
	return fd, nil
}
