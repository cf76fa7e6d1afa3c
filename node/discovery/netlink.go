package discovery

import (
	"cmp"
	"fmt"

	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/rtnl"
)

// dumpedLink is what netlink says of one link.
type dumpedLink struct {
	ifindex   int
	mtu       int
	operState string
	up        bool
}

// linkDump is one netlink dump of the links and default routes of the
// network namespace discovery runs in.
type linkDump struct {
	byName       map[string]dumpedLink
	defaultRoute map[int]bool
	problems     []string
	// listed is true once the links were listed whole: a link it lacks is
	// not in the namespace.
	listed bool
}

// pendingLinks is a link table that is being dumped while the scan runs.
type pendingLinks struct {
	done  chan struct{}
	table linkDump
}

// has reports whether the dump is in and has a link of that name and
// ifindex; it never waits.
func (p *pendingLinks) has(name string, ifindex int) bool {
	select {
	case <-p.done:
		l, ok := p.table.byName[name]
		return ok && l.ifindex == ifindex
	default:
		return false
	}
}

// readLinkTable dumps links and routes once each, so that discovery costs
// three netlink requests however many functions there are. netnsPath
// names the network namespace to ask; "" means the caller's.
func readLinkTable(netnsPath string) linkDump {
	t := linkDump{byName: map[string]dumpedLink{}, defaultRoute: map[int]bool{}}
	sock, err := openRouteSocket(netnsPath)
	if err != nil {
		t.problems = append(t.problems, fmt.Sprintf("netlink: %v; link state comes from sysfs", err))
		return t
	}
	defer sock.Close()
	buf := make([]byte, 1<<16)
	if err := dump(sock, buf, rtnl.LinkDumpRequest(), unix.RTM_NEWLINK, t.addLink); err != nil {
		t.problems = append(t.problems, fmt.Sprintf("netlink: listing links: %v; link state comes from sysfs", err))
	} else {
		t.listed = true
	}
	for _, family := range []int{unix.AF_INET, unix.AF_INET6} {
		if err := dump(sock, buf, routeDumpRequest(family), unix.RTM_NEWROUTE, t.addRoute); err != nil {
			t.problems = append(t.problems, fmt.Sprintf("netlink: listing routes: %v; default-route NICs are not detected", err))
			break
		}
	}
	return t
}

// openRouteSocket opens a rtnetlink socket in the network namespace at
// path, or in the caller's when path is "". A socket, unlike switching
// the thread's namespace, serves any goroutine.
func openRouteSocket(path string) (*nl.NetlinkSocket, error) {
	ns := netns.None()
	if path != "" {
		var err error
		if ns, err = netns.GetFromPath(path); err != nil {
			return nil, fmt.Errorf("opening network namespace %s: %w", path, err)
		}
		defer ns.Close()
	}
	sock, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_ROUTE)
	if err != nil {
		return nil, err
	}
	// Strict checking makes the kernel honour the route dump's table, so
	// the local table's route per link and address never reaches us.
	// Kernels before 4.20 lack it; parseDefaultRoute checks the table too.
	_ = unix.SetsockoptInt(sock.GetFd(), unix.SOL_NETLINK, unix.NETLINK_GET_STRICT_CHK, 1)
	return sock, nil
}

func routeDumpRequest(family int) *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(unix.RTM_GETROUTE, unix.NLM_F_DUMP)
	req.AddData(&nl.RtMsg{RtMsg: unix.RtMsg{Family: uint8(family), Table: unix.RT_TABLE_MAIN}})
	return req
}

// dump sends a dump request and hands the body of every message of type
// want to fn. It walks each datagram in place and parses only what fn
// asks for: the netlink package's LinkList and RouteList parse every
// attribute of every link and route, which on a node with thousands of VFs
// (and their IPv6 link-local routes) costs more than the whole sysfs scan.
func dump(sock *nl.NetlinkSocket, buf []byte, req *nl.NetlinkRequest, want uint16, fn func(body []byte)) error {
	if err := sock.Send(req); err != nil {
		return err
	}
	for {
		n, _, err := unix.Recvfrom(sock.GetFd(), buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		done, err := walkMessages(buf[:n], want, fn)
		if done || err != nil {
			return err
		}
	}
}

// walkMessages walks one datagram of a dump; done is true at its end.
func walkMessages(b []byte, want uint16, fn func(body []byte)) (done bool, err error) {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(nl.NativeEndian().Uint32(b))
		typ := nl.NativeEndian().Uint16(b[4:])
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return true, fmt.Errorf("malformed netlink message of length %d", l)
		}
		body := b[unix.NLMSG_HDRLEN:l]
		switch typ {
		case unix.NLMSG_DONE:
			return true, nil
		case unix.NLMSG_ERROR:
			return true, nlError(body)
		case want:
			fn(body)
		}
		b = b[min(rtnl.Align(l), len(b)):]
	}
	return false, nil
}

func (t *linkDump) addLink(body []byte) {
	if name, st, ok := parseLinkMessage(body); ok {
		t.byName[name] = st
	}
}

// addRoute records the interfaces of a default route of the main table.
func (t *linkDump) addRoute(body []byte) {
	for _, ifindex := range parseDefaultRoute(body) {
		t.defaultRoute[ifindex] = true
	}
}

// apply replaces the sysfs link state of nd with netlink's when netlink
// sees a link of that name and ifindex. The ifindex check keeps a link of
// the same name in another namespace from being mistaken for this one. A
// netdev the whole listing lacks is elsewhere: a sysfs tree mounted for
// another namespace, or one that is not namespaced, still shows it.
func (t *linkDump) apply(nd *Netdev) {
	l, ok := t.byName[nd.Name]
	if !ok || l.ifindex != nd.Ifindex {
		nd.Elsewhere = t.listed
		return
	}
	nd.MTU = l.mtu
	nd.OperState = l.operState
	nd.Up = l.up
	nd.StateFrom = "netlink"
	nd.DefaultRoute = t.defaultRoute[l.ifindex]
}

// Offsets in a RTM_NEWLINK message: struct ifinfomsg, then attributes.
// parseLinkMessage takes name, index, flags, MTU and operstate from the
// body of a RTM_NEWLINK message; ok is false for a message malformed or
// unnamed. A link without an operstate is "unknown", as sysfs says.
func parseLinkMessage(b []byte) (name string, st dumpedLink, ok bool) {
	l, ok := rtnl.ParseLink(b)
	if !ok {
		return "", st, false
	}
	return l.Name, dumpedLink{ifindex: l.Index, mtu: l.MTU, operState: cmp.Or(l.OperState, "unknown"), up: l.Up}, true
}

// nlError turns an NLMSG_ERROR body into the errno it carries.
func nlError(b []byte) error {
	if len(b) < 4 {
		return fmt.Errorf("short netlink error message")
	}
	return unix.Errno(-int32(nl.NativeEndian().Uint32(b)))
}

// Offsets in a RTM_NEWROUTE message: struct rtmsg, then attributes.
const (
	rtmsgLen     = 12
	rtmsgDstLen  = 1
	rtmsgTable   = 4
	rtmsgType    = 7
	rtnexthopLen = 8
	rtnexthopOIF = 4
)

// parseDefaultRoute returns the output interfaces of a unicast default
// route (destination length 0) in the main table, or nil for any other.
func parseDefaultRoute(b []byte) []int {
	if len(b) < rtmsgLen || b[rtmsgDstLen] != 0 || b[rtmsgType] != unix.RTN_UNICAST {
		return nil
	}
	table := uint32(b[rtmsgTable])
	var oifs []int
	rtnl.WalkAttrs(b[rtmsgLen:], func(typ uint16, v []byte) {
		switch {
		case typ == unix.RTA_TABLE && len(v) == 4:
			table = nl.NativeEndian().Uint32(v)
		case typ == unix.RTA_OIF && len(v) == 4:
			oifs = append(oifs, int(int32(nl.NativeEndian().Uint32(v))))
		case typ == unix.RTA_MULTIPATH:
			oifs = append(oifs, nexthopOIFs(v)...)
		}
	})
	if table != unix.RT_TABLE_MAIN {
		return nil
	}
	return oifs
}

// nexthopOIFs lists the interfaces of a RTA_MULTIPATH's rtnexthops.
func nexthopOIFs(b []byte) []int {
	var oifs []int
	for len(b) >= rtnexthopLen {
		l := int(nl.NativeEndian().Uint16(b))
		if l < rtnexthopLen || l > len(b) {
			break
		}
		oifs = append(oifs, int(int32(nl.NativeEndian().Uint32(b[rtnexthopOIF:]))))
		b = b[min(rtnl.Align(l), len(b)):]
	}
	return oifs
}
