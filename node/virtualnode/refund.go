package virtualnode

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/rtnl"
)

// ReturnNetdevs does for the node's netdevs what the kernel does for a
// physical function's, VF's or SF's netdev when the network namespace it was
// moved into is destroyed: it comes back to the host's namespace
// (default_device_exit_net pushes every device that is no virtual link
// back to init_net), where the node's netns stands for the host's. A
// veth is a virtual link and dies with that namespace, taking its peer,
// the representor, along; so when a representor dies while its
// function's netdev was away (moved out, as CNI plugins move VFs into
// pods), ReturnNetdevs makes the pair again with the netdev's name, MAC,
// MTU, state and ifindex, and the representor's name and MAC. A pair
// deleted while its netdev was home (RemoveVF, SetNumVFs, BindDriver) is
// left deleted.
//
// Where the emulation differs: a real netdev keeps the name it had in the
// dying namespace (the pod's "net1"), or becomes "devN" when that is
// taken, and its current MAC and MTU; the emulation gives back the
// function's own, as the tree still records them.
//
// Link notifications lost under load (ENOBUFS) are made up for with a
// link dump: a pair the tree records and the node's netns lacks at both
// ends died with a namespace meanwhile, and is made again.
//
// It runs until ctx is done, calling ready (if not nil) once it watches.
// Only one process may run it for a node: a test in the process that built
// the node, or the cluster's daemon (cmd/hwnet-vnode-kernel).
func (n *Node) ReturnNetdevs(ctx context.Context, log *slog.Logger, ready func()) error {
	if n.st.Netns == "" {
		return errors.New("return netdevs: the node has no links")
	}
	ns, err := netns.GetFromName(n.st.Netns)
	if err != nil {
		return fmt.Errorf("return netdevs: open netns %s: %w", n.st.Netns, err)
	}
	defer ns.Close()
	sock, err := nl.SubscribeAt(ns, netns.None(), unix.NETLINK_ROUTE, unix.RTNLGRP_LINK)
	if err != nil {
		return fmt.Errorf("return netdevs: subscribe to links in %s: %w", n.st.Netns, err)
	}
	stop := context.AfterFunc(ctx, sock.Close)
	defer stop()
	r, err := n.newReturner(ns, log)
	if err != nil {
		sock.Close()
		return err
	}
	defer r.Close()
	if ready != nil {
		ready()
	}
	err = r.serve(sock)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// returner follows where the node's netdevs are, from the link
// notifications of the node's netns.
type returner struct {
	n  *Node
	ls *links
	// sock makes the requests the netlink library cannot.
	sock *nl.NetlinkSocket
	log  *slog.Logger
	// away holds the names of the netdevs moved out of the node's netns.
	away map[string]bool
}

// newReturner finds the netdevs that are away already: their
// representor is there, they are not. Subscribed first, it misses no move.
func (n *Node) newReturner(ns netns.NsHandle, log *slog.Logger) (*returner, error) {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("return netdevs: netlink in %s: %w", n.st.Netns, err)
	}
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("return netdevs: netlink in %s: %w", n.st.Netns, err)
	}
	r := &returner{n: n, ls: &links{ns: netns.None(), h: h}, sock: sock, log: log, away: map[string]bool{}}
	// A pair gone at both ends already is left so: what took it went
	// before this returner could see it go.
	if _, err := r.follow(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// vethPair is a netdev of the node, a function's or an SF's, and the
// peer that plays its representor, with the MACs the tree gave them.
type vethPair struct {
	// device names the netdev's device for logs: a PCI address or an
	// SF's auxiliary device name.
	device      string
	netdev, rep *Netdev
	mac, repMAC net.HardwareAddr
}

// vethPairs lists the node's pairs, reading the state again when another
// process saved it: VFs made after the start, by another process, are
// there.
func (n *Node) vethPairs() []vethPair {
	n.lock()
	defer n.mu.Unlock()
	var out []vethPair
	for _, f := range n.st.Functions {
		rid, err := parseRoutingID(f.Addr)
		if f.Netdev == nil || f.Representor == nil || err != nil {
			continue
		}
		out = append(out, vethPair{f.Addr, clonePtr(f.Netdev), clonePtr(f.Representor),
			n.st.linkMAC(rid, roleFunction), n.st.linkMAC(rid, roleRepresentor)})
		for _, sf := range f.SFs {
			out = append(out, vethPair{sf.Name, clonePtr(sf.Netdev), clonePtr(sf.Representor),
				sfMAC(n.st, rid, sf.Num, roleFunction), sfMAC(n.st, rid, sf.Num, roleRepresentor)})
		}
	}
	return out
}

// follow takes the node's links afresh: a pair the tree records whose
// representor is there and netdev is not is away; it returns those whose
// netdev and representor are both gone.
func (r *returner) follow() ([]vethPair, error) {
	all, err := linkList(r.ls.h)
	if err != nil {
		return nil, fmt.Errorf("return netdevs: list links: %w", err)
	}
	present := make(map[string]bool, len(all))
	for _, l := range all {
		present[l.Attrs().Name] = true
	}
	clear(r.away)
	var gone []vethPair
	for _, p := range r.n.vethPairs() {
		switch {
		case present[p.netdev.Name]:
		case present[p.rep.Name]:
			r.away[p.netdev.Name] = true
		default:
			gone = append(gone, p)
		}
	}
	return gone, nil
}

// resync follows the node's links after notifications were lost
// (ENOBUFS, under load): a pair the tree still records whose netdev and
// representor are both gone died with a namespace meanwhile, and is made
// again, as the kernel never loses a physical netdev.
func (r *returner) resync() error {
	gone, err := r.follow()
	if err != nil {
		return err
	}
	for i := range gone {
		r.give(&gone[i], "netdev returned after link notifications were lost")
	}
	return nil
}

// give makes the pair again and says so.
func (r *returner) give(p *vethPair, msg string) {
	if err := r.recreate(p); err != nil {
		r.log.Error("netdev whose namespace died not returned", "netdev", p.netdev.Name, "device", p.device, "err", err)
		return
	}
	r.log.Info(msg, "netdev", p.netdev.Name, "device", p.device, "ifindex", p.netdev.Index)
}

func (r *returner) Close() {
	r.sock.Close()
	r.ls.Close()
}

func (r *returner) serve(sock *nl.NetlinkSocket) error {
	for {
		msgs, _, err := sock.Receive()
		if errors.Is(err, unix.ENOBUFS) {
			r.log.Warn("link notifications lost: taking the node's links afresh", "err", err)
			if err := r.resync(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("return netdevs: receive: %w", err)
		}
		for _, m := range msgs {
			r.handle(m)
		}
	}
}

// handle follows one link notification: a netdev leaving (RTM_DELLINK
// naming the namespace it moves to) or coming back, and a representor
// dying while its netdev is away.
func (r *returner) handle(m syscall.NetlinkMessage) {
	if m.Header.Type != unix.RTM_NEWLINK && m.Header.Type != unix.RTM_DELLINK {
		return
	}
	link, ok := rtnl.ParseLink(m.Data)
	if !ok {
		return
	}
	if m.Header.Type == unix.RTM_NEWLINK {
		delete(r.away, link.Name)
		return
	}
	if movedOut(m.Data) {
		r.away[link.Name] = true
		return
	}
	p, ok := r.representing(link.Name)
	if !ok || !r.away[p.netdev.Name] {
		return
	}
	delete(r.away, p.netdev.Name)
	r.give(&p, "netdev returned from a destroyed namespace")
}

// movedOut reports whether a RTM_DELLINK is a move to another namespace,
// which names it (IFLA_NEW_NETNSID), rather than a deletion.
func movedOut(body []byte) bool {
	moved := false
	rtnl.WalkAttrs(body[unix.SizeofIfInfomsg:], func(typ uint16, _ []byte) {
		moved = moved || typ == unix.IFLA_NEW_NETNSID
	})
	return moved
}

// representing returns the pair whose representor is named name.
func (r *returner) representing(name string) (vethPair, bool) {
	for _, p := range r.n.vethPairs() {
		if p.rep.Name == name {
			return p, true
		}
	}
	return vethPair{}, false
}

// recreate makes the veth pair again as it was built, on the ifindexes
// the tree records. The netlink library cannot ask for the peer's
// ifindex, so the request is made here.
func (r *returner) recreate(p *vethPair) error {
	req := nl.NewNetlinkRequest(unix.RTM_NEWLINK, unix.NLM_F_CREATE|unix.NLM_F_EXCL|unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(p.netdev.Index)
	if p.netdev.Up {
		msg.Flags, msg.Change = unix.IFF_UP, unix.IFF_UP
	}
	req.AddData(msg)
	addLinkAttrs(req.AddData, p.netdev, p.mac)
	info := nl.NewRtAttr(unix.IFLA_LINKINFO, nil)
	info.AddRtAttr(nl.IFLA_INFO_KIND, nl.NonZeroTerminated("veth"))
	peer := info.AddRtAttr(nl.IFLA_INFO_DATA, nil).AddRtAttr(nl.VETH_INFO_PEER, nil)
	nl.NewIfInfomsgChild(peer, unix.AF_UNSPEC).Index = int32(p.rep.Index)
	addLinkAttrs(func(a nl.NetlinkRequestData) { peer.AddChild(a) }, p.rep, p.repMAC)
	req.AddData(info)
	req.Sockets = map[int]*nl.SocketHandle{unix.NETLINK_ROUTE: {Socket: r.sock}}
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", p.netdev.Name, p.rep.Name, err)
	}
	return r.ls.setUp(p.rep.Name, p.rep.Up)
}

// addLinkAttrs adds a netdev's name, MAC and MTU.
func addLinkAttrs(add func(nl.NetlinkRequestData), nd *Netdev, mac net.HardwareAddr) {
	add(nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated(nd.Name)))
	add(nl.NewRtAttr(unix.IFLA_ADDRESS, mac))
	if nd.MTU > 0 {
		add(nl.NewRtAttr(unix.IFLA_MTU, nl.Uint32Attr(uint32(nd.MTU))))
	}
}
