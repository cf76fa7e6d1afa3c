package virtualnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
)

// netnsDir is where named network namespaces are bound, as by ip netns.
const netnsDir = "/run/netns"

// settleTimeout bounds the wait for new links' operstate: the kernel
// settles it within milliseconds on an idle machine, but its linkwatch
// worker took over 10 s for 2048 VFs at load average 17-25.
const settleTimeout = time.Minute

// settlePoll is how often settle lists the links: a dump of thousands of
// links costs milliseconds of CPU the linkwatch worker then lacks.
const settlePoll = 20 * time.Millisecond

// The management network of the NIC that holds the default route.
var (
	routeAddr    = net.IPNet{IP: net.IPv4(10, 255, 0, 2), Mask: net.CIDRMask(24, 32)}
	routeGateway = net.IPv4(10, 255, 0, 1)
)

// createNetns creates the named network namespace. netns.NewNamed moves
// the calling thread into it, so it runs on a locked thread of its own that
// exits with its goroutine instead of returning to the scheduler.
func createNetns(name string) error {
	if err := shareNetnsDir(); err != nil {
		return err
	}
	err := osthread.Run(func() error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return err
		}
		if err := h.Close(); err != nil {
			return err
		}
		return quietIPv6()
	})
	if err != nil {
		return fmt.Errorf("create netns %s: %w", name, err)
	}
	return nil
}

// shareNetnsDir makes netnsDir a shared mount of its own, as `ip netns
// add` does the first time it runs. Were it a plain directory, a later
// `ip netns add` (a test's pod netns) would bind netnsDir over itself and
// bury the node's netns bind under the new mount: unmount would then fail
// with EINVAL, remove with EBUSY, and the name would stay taken until
// reboot.
func shareNetnsDir() error {
	if err := os.MkdirAll(netnsDir, 0o755); err != nil {
		return fmt.Errorf("netns dir: %w", err)
	}
	err := unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err != unix.EINVAL {
		return wrapNetnsDirErr("make shared", err)
	}
	// EINVAL: not a mount point yet.
	if err := unix.Mount(netnsDir, netnsDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return wrapNetnsDirErr("bind", err)
	}
	return wrapNetnsDirErr("make shared", unix.Mount("", netnsDir, "none", unix.MS_SHARED|unix.MS_REC, ""))
}

func wrapNetnsDirErr(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s %s: %w", step, netnsDir, err)
}

// quietIPv6 turns off duplicate address detection and router
// solicitations for the links of the calling thread's netns: on thousands
// of new veths they keep the kernel busy for seconds after a build, which
// slows tests and skews benchmarks. Links keep their IPv6 link-local
// addresses and routes, as on a real node.
func quietIPv6() error {
	for _, key := range []string{"accept_dad", "dad_transmits", "router_solicitations"} {
		for _, scope := range []string{"all", "default"} {
			p := "/proc/sys/net/ipv6/conf/" + scope + "/" + key
			err := os.WriteFile(p, []byte("0\n"), 0o644)
			if errors.Is(err, os.ErrNotExist) {
				return nil // a kernel without IPv6
			}
			if err != nil {
				return fmt.Errorf("quiet IPv6: %w", err)
			}
		}
	}
	return nil
}

// deleteNetns unbinds and removes a named netns, which destroys its links
// once no process is left in it. A netns that is already gone is no error;
// one whose bind is buried under a later bind of netnsDir is, said so
// rather than as the EBUSY of the remove that follows.
func deleteNetns(name string) error {
	path := filepath.Join(netnsDir, name)
	err := unix.Unmount(path, unix.MNT_DETACH)
	if err == unix.EINVAL && isMountPoint(path) {
		return fmt.Errorf("delete netns %s: its bind mount is buried under a later bind mount of %s over itself, "+
			"made while %s was no mount point of its own; unmount that first: %w", name, netnsDir, netnsDir, err)
	}
	if err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("delete netns %s: unmount: %w", name, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// isMountPoint reports whether any mount of the calling thread's mount
// namespace, visible or buried under another, is at path.
func isMountPoint(path string) bool {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(data)) {
		if fields := strings.Fields(line); len(fields) > 4 && fields[4] == path {
			return true
		}
	}
	return false
}

// links changes the veth pairs in a node's netns.
type links struct {
	ns netns.NsHandle
	h  *netlink.Handle
}

func openLinks(netnsName string) (*links, error) {
	ns, err := netns.GetFromName(netnsName)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", netnsName, err)
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		ns.Close()
		return nil, fmt.Errorf("netlink in netns %s: %w", netnsName, err)
	}
	return &links{ns: ns, h: h}, nil
}

func (l *links) Close() {
	l.h.Close()
	l.ns.Close()
}

// add creates a veth pair for each function with a netdev, both ends up,
// records the real ifindexes and gives the node's route-holding netdev its
// address and route.
func (l *links) add(ctx context.Context, st *state, fs []*Function) error {
	for _, f := range fs {
		if f.Netdev == nil {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := l.addPair(st, f); err != nil {
			return err
		}
	}
	if err := l.refresh(fs); err != nil {
		return err
	}
	// The peer's flags cannot be given at creation; set it up by the
	// index the dump found, which saves a lookup by name.
	for _, f := range fs {
		for _, peer := range f.peers() {
			if !peer.Up {
				continue
			}
			if err := l.h.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: peer.Index}}); err != nil {
				return fmt.Errorf("set %s up: %w", peer.Name, err)
			}
		}
		if f.Netdev != nil && f.Ifname == st.RouteDev {
			if err := l.addDefaultRoute(f); err != nil {
				return err
			}
		}
	}
	return l.settle(ctx, fs)
}

// settle waits until every link planned operationally up says so. The
// kernel sets a veth's operstate from its peer's carrier a moment after
// both are up (linkwatch); a node handed over before then shows whatever
// watches it first its links going up, which a booted host does not.
func (l *links) settle(ctx context.Context, fs []*Function) error {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	for {
		pending, err := l.notYetUp(fs)
		if err != nil || len(pending) == 0 {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("links %s not operationally up: %w", strings.Join(pending, ", "), ctx.Err())
		case <-time.After(settlePoll):
		}
	}
}

// notYetUp names the functions' links planned up whose operstate is not.
func (l *links) notYetUp(fs []*Function) ([]string, error) {
	all, err := linkList(l.h)
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	oper := make(map[string]netlink.LinkOperState, len(all))
	for _, link := range all {
		oper[link.Attrs().Name] = link.Attrs().OperState
	}
	var pending []string
	for _, f := range fs {
		for _, nd := range f.linkEnds() {
			if nd.OperState == "up" && oper[nd.Name] != netlink.OperUp {
				pending = append(pending, nd.Name)
			}
		}
	}
	return pending, nil
}

// addPair adds the function's veth pair and, for a DualPort function,
// its second port's, and a PF's SFs'.
func (l *links) addPair(st *state, f *Function) error {
	rid, err := parseRoutingID(f.Addr)
	if err != nil {
		return err
	}
	if err := l.addVeth(f.Netdev, f.Representor, vethMAC(f.Netdev, st.linkMAC(rid, roleFunction)), vethMAC(f.Representor, st.linkMAC(rid, roleRepresentor))); err != nil {
		return err
	}
	if f.Port2 != nil {
		if err := l.addVeth(f.Port2, f.Port2Peer, vethMAC(f.Port2, st.linkMAC(rid, rolePort2)), vethMAC(f.Port2Peer, st.linkMAC(rid, rolePort2Peer))); err != nil {
			return err
		}
	}
	for _, sf := range f.SFs {
		if err := l.addSFVeth(st, rid, sf); err != nil {
			return err
		}
	}
	return nil
}

// addSFVeth adds the SF's veth pair: its netdev and its representor.
func (l *links) addSFVeth(st *state, pf routingID, sf *SF) error {
	return l.addVeth(sf.Netdev, sf.Representor, vethMAC(sf.Netdev, sfMAC(st, pf, sf.Num, roleFunction)),
		vethMAC(sf.Representor, sfMAC(st, pf, sf.Num, roleRepresentor)))
}

// vethMAC is the MAC a netdev's veth gets: its own when it has an
// Ethernet one (a captured node's), else def; an IPoIB netdev's veth
// stays Ethernet.
func vethMAC(nd *Netdev, def net.HardwareAddr) net.HardwareAddr {
	if mac, err := net.ParseMAC(nd.Address); err == nil && len(mac) == 6 {
		return mac
	}
	return def
}

func (l *links) addVeth(nd, peer *Netdev, mac, peerMAC net.HardwareAddr) error {
	flags := net.Flags(0)
	if nd.Up {
		flags = net.FlagUp
	}
	veth := &netlink.Veth{
		LinkAttrs: netlink.LinkAttrs{
			Name: nd.Name, HardwareAddr: mac,
			MTU: nd.MTU, Flags: flags, TxQLen: -1,
		},
		PeerName:         peer.Name,
		PeerHardwareAddr: peerMAC,
		PeerTxQLen:       -1,
	}
	if err := l.h.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", nd.Name, peer.Name, err)
	}
	return nil
}

// refresh reads the real ifindex and MAC of the functions' veth ends with
// one link dump. An IPoIB netdev keeps its 20-byte address in the tree.
func (l *links) refresh(fs []*Function) error {
	all, err := linkList(l.h)
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	byName := make(map[string]*netlink.LinkAttrs, len(all))
	for _, link := range all {
		byName[link.Attrs().Name] = link.Attrs()
	}
	for _, f := range fs {
		for _, nd := range f.linkEnds() {
			a, ok := byName[nd.Name]
			if !ok {
				return fmt.Errorf("link %s: %w", nd.Name, os.ErrNotExist)
			}
			nd.Index = a.Index
			if nd.Type == arphrdEther {
				nd.Address = a.HardwareAddr.String()
			}
		}
	}
	return nil
}

// del deletes the function's veth pairs, its SFs' included; deleting one
// end takes the other. A netdev that is no longer in the netns, e.g. moved
// into a pod by a CNI plugin, is left alone.
func (l *links) del(f *Function) error {
	netdevs := []*Netdev{f.Netdev, f.Port2}
	for _, sf := range f.SFs {
		netdevs = append(netdevs, sf.Netdev)
	}
	for _, nd := range netdevs {
		if nd == nil {
			continue
		}
		if err := l.delVeth(nd); err != nil {
			return err
		}
	}
	return nil
}

// delVeth deletes the netdev's veth pair, unless the netdev is no longer
// in the netns.
func (l *links) delVeth(nd *Netdev) error {
	link, err := l.h.LinkByName(nd.Name)
	if _, gone := errors.AsType[netlink.LinkNotFoundError](err); gone {
		return nil
	}
	if err == nil {
		err = l.h.LinkDel(link)
	}
	if err != nil {
		return fmt.Errorf("delete veth %s: %w", nd.Name, err)
	}
	return nil
}

// setUp sets a link up or down by name: a CNI plugin restores the name
// when it gives a link back, while its index may change.
func (l *links) setUp(name string, up bool) error {
	link, err := l.h.LinkByName(name)
	if err == nil && up {
		err = l.h.LinkSetUp(link)
	} else if err == nil {
		err = l.h.LinkSetDown(link)
	}
	if err != nil {
		return fmt.Errorf("set %s up=%t: %w", name, up, err)
	}
	return nil
}

// operPoll is how often waitVethStates looks, operSettle how long it
// waits at most: the link watch fires within a second, later on a loaded
// machine.
const (
	operPoll   = 2 * time.Millisecond
	operSettle = 30 * time.Second
)

// waitVethStates waits until netlink reports the operstate a veth pair
// settles at with these administrative states, or ctx ends: each end is
// down when itself is, lowerlayerdown when only its peer is, else up.
func (l *links) waitVethStates(ctx context.Context, a, b *Netdev) error {
	if a == nil || b == nil || a.Name == "" || b.Name == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, operSettle)
	defer cancel()
	for _, end := range []struct {
		nd       *Netdev
		peerIsUp bool
	}{{a, b.Up}, {b, a.Up}} {
		want := netlink.LinkOperState(netlink.OperUp)
		switch {
		case !end.nd.Up:
			want = netlink.OperDown
		case !end.peerIsUp:
			want = netlink.OperLowerLayerDown
		}
		if err := l.waitOperState(ctx, end.nd.Name, want); err != nil {
			return err
		}
	}
	return nil
}

func (l *links) waitOperState(ctx context.Context, name string, want netlink.LinkOperState) error {
	for {
		link, err := l.h.LinkByName(name)
		if err != nil {
			return fmt.Errorf("link %s: %w", name, err)
		}
		if link.Attrs().OperState == want {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("link %s: operstate %s, want %s: %w", name, link.Attrs().OperState, want, ctx.Err())
		case <-time.After(operPoll):
		}
	}
}

// setUpLoopback brings lo up, as on any booted host.
func (l *links) setUpLoopback() error {
	if err := l.h.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: 1}}); err != nil {
		return fmt.Errorf("set lo up: %w", err)
	}
	return nil
}

// addDefaultRoute gives the function's netdev the management address and
// the netns's default route through it.
func (l *links) addDefaultRoute(f *Function) error {
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: f.Netdev.Index, Name: f.Netdev.Name}}
	addr := routeAddr
	if err := l.h.AddrAdd(link, &netlink.Addr{IPNet: &addr}); err != nil {
		return fmt.Errorf("add %s to %s: %w", routeAddr.String(), f.Netdev.Name, err)
	}
	route := &netlink.Route{LinkIndex: f.Netdev.Index, Gw: routeGateway}
	if err := l.h.RouteAdd(route); err != nil {
		return fmt.Errorf("add default route via %s: %w", routeGateway, err)
	}
	return nil
}

// dumpRetries bounds how often a link dump the kernel interrupted (links
// changed during it, as they do while VFs come and go) is taken again.
const dumpRetries = 10

// linkList is every link, from a dump no change interrupted: the
// kernel's answer to a bind does not fail because another link changed.
func linkList(h *netlink.Handle) ([]netlink.Link, error) {
	for range dumpRetries - 1 {
		all, err := h.LinkList()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return all, err
		}
	}
	return h.LinkList()
}
