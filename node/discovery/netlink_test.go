package discovery

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/rtnl"
)

// attr encodes one rtattr, padded to 4 bytes.
func attr(typ uint16, v []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtAttr+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	return append(b, make([]byte, rtnl.Align(len(b))-len(b))...)
}

func u32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

func linkMessage(index int32, attrs ...[]byte) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	return append(b, slices.Concat(attrs...)...)
}

func routeMessage(dstLen, table, typ byte, attrs ...[]byte) []byte {
	b := make([]byte, rtmsgLen)
	b[rtmsgDstLen], b[rtmsgTable], b[rtmsgType] = dstLen, table, typ
	return append(b, slices.Concat(attrs...)...)
}

func TestParseLinkMessage(t *testing.T) {
	msg := linkMessage(7, attr(unix.IFLA_IFNAME, []byte("enp59s0f0v3\x00")), attr(unix.IFLA_MTU, u32(9000)),
		attr(unix.IFLA_OPERSTATE, []byte{6}))
	name, st, ok := parseLinkMessage(msg)
	if !ok || name != "enp59s0f0v3" || st != (dumpedLink{ifindex: 7, mtu: 9000, operState: "up"}) {
		t.Errorf("parseLinkMessage = %q %+v %v", name, st, ok)
	}
	for _, bad := range [][]byte{nil, msg[:unix.SizeofIfInfomsg-1], linkMessage(3, attr(unix.IFLA_MTU, u32(1500)))} {
		if _, _, ok := parseLinkMessage(bad); ok {
			t.Errorf("parseLinkMessage(%x) accepted a message without a name", bad)
		}
	}
}

func TestParseDefaultRoute(t *testing.T) {
	multipath := slices.Concat(nexthop(4), nexthop(9))
	for _, tc := range []struct {
		name string
		msg  []byte
		want []int
	}{
		{"default via oif", routeMessage(0, unix.RT_TABLE_MAIN, unix.RTN_UNICAST, attr(unix.RTA_OIF, u32(5))), []int{5}},
		{"default, multipath", routeMessage(0, unix.RT_TABLE_MAIN, unix.RTN_UNICAST, attr(unix.RTA_MULTIPATH, multipath)), []int{4, 9}},
		{"a /24", routeMessage(24, unix.RT_TABLE_MAIN, unix.RTN_UNICAST, attr(unix.RTA_OIF, u32(5))), nil},
		{"local table", routeMessage(0, unix.RT_TABLE_LOCAL, unix.RTN_UNICAST, attr(unix.RTA_OIF, u32(5))), nil},
		{"table attribute wins", routeMessage(0, unix.RT_TABLE_COMPAT, unix.RTN_UNICAST, attr(unix.RTA_TABLE, u32(1000)), attr(unix.RTA_OIF, u32(5))), nil},
		{"unreachable", routeMessage(0, unix.RT_TABLE_MAIN, unix.RTN_UNREACHABLE), nil},
		{"short", []byte{0, 0}, nil},
	} {
		if got := parseDefaultRoute(tc.msg); !slices.Equal(got, tc.want) {
			t.Errorf("%s: parseDefaultRoute = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func nexthop(oif int32) []byte {
	b := binary.NativeEndian.AppendUint16(nil, rtnexthopLen)
	b = append(b, 0, 0)
	return binary.NativeEndian.AppendUint32(b, uint32(oif))
}

func TestWalkMessages(t *testing.T) {
	var bodies int
	count := func([]byte) { bodies++ }
	hdr := func(l uint32, typ uint16) []byte {
		b := binary.NativeEndian.AppendUint32(nil, l)
		b = binary.NativeEndian.AppendUint16(b, typ)
		return append(b, make([]byte, 10)...)
	}
	link := append(hdr(unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg, unix.RTM_NEWLINK), make([]byte, unix.SizeofIfInfomsg)...)
	if done, err := walkMessages(slices.Concat(link, link), unix.RTM_NEWLINK, count); done || err != nil || bodies != 2 {
		t.Errorf("two links: done=%v err=%v bodies=%d", done, err, bodies)
	}
	if done, err := walkMessages(hdr(unix.NLMSG_HDRLEN, unix.NLMSG_DONE), unix.RTM_NEWLINK, count); !done || err != nil {
		t.Errorf("NLMSG_DONE: done=%v err=%v", done, err)
	}
	errMsg := append(hdr(unix.NLMSG_HDRLEN+4, unix.NLMSG_ERROR), binary.NativeEndian.AppendUint32(nil, ^uint32(unix.EPERM)+1)...)
	if _, err := walkMessages(errMsg, unix.RTM_NEWLINK, count); err != unix.EPERM {
		t.Errorf("NLMSG_ERROR: err=%v, want EPERM", err)
	}
	if _, err := walkMessages(hdr(1000, unix.RTM_NEWLINK), unix.RTM_NEWLINK, count); err == nil {
		t.Error("a message longer than its datagram was accepted")
	}
}

// FuzzNetlinkParsers: what the kernel sends is parsed in place; no input
// may panic or read past its end.
func FuzzNetlinkParsers(f *testing.F) {
	f.Add(linkMessage(7, attr(unix.IFLA_IFNAME, []byte("eth0\x00")), attr(unix.IFLA_OPERSTATE, []byte{6})))
	f.Add(routeMessage(0, unix.RT_TABLE_MAIN, unix.RTN_UNICAST, attr(unix.RTA_MULTIPATH, nexthop(4))))
	f.Add([]byte{0xff, 0xff, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		parseLinkMessage(b)
		parseDefaultRoute(b)
		walkMessages(b, unix.RTM_NEWLINK, func([]byte) {})
		nexthopOIFs(b)
	})
}
