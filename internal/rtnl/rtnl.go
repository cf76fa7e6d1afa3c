// Package rtnl reads rtnetlink message bodies in place: a link's
// RTM_NEWLINK or RTM_DELLINK message and the attributes of any message.
// It is the one parser of these for discovery's link dumps and watch's
// link notifications.
package rtnl

import (
	"bytes"
	"encoding/binary"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

// Link is what a link message says of a network link.
type Link struct {
	Name  string
	Index int
	// Up is the administrative state, IFF_UP.
	Up bool
	// OperState is the kernel's RFC 2863 state as ip and sysfs name it
	// ("up", "down", "lowerlayerdown", "dormant", "testing", "notpresent",
	// "unknown"); empty when the message carries none.
	OperState string
	// MTU is 0 when the message carries none.
	MTU int
}

// operStates are the kernel's IF_OPER_* values in order.
var operStates = [...]string{"unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"}

// ParseLink reads the body of a RTM_NEWLINK or RTM_DELLINK message (struct
// ifinfomsg, then attributes); ok is false when it is malformed or names
// no link.
func ParseLink(b []byte) (l Link, ok bool) {
	if len(b) < unix.SizeofIfInfomsg {
		return l, false
	}
	l.Index = int(int32(binary.NativeEndian.Uint32(b[4:])))
	l.Up = binary.NativeEndian.Uint32(b[8:])&unix.IFF_UP != 0
	wellFormed := WalkAttrs(b[unix.SizeofIfInfomsg:], func(typ uint16, v []byte) {
		switch {
		case typ == unix.IFLA_IFNAME:
			l.Name = string(bytes.TrimRight(v, "\x00"))
		case typ == unix.IFLA_MTU && len(v) == 4:
			l.MTU = int(binary.NativeEndian.Uint32(v))
		case typ == unix.IFLA_OPERSTATE && len(v) > 0:
			l.OperState = operState(v[0])
		}
	})
	return l, wellFormed && l.Name != ""
}

func operState(v byte) string {
	if int(v) < len(operStates) {
		return operStates[v]
	}
	return "unknown"
}

// WalkAttrs calls fn for each attribute in b, the nested flag cleared from
// its type; it stops at an attribute shorter than its header or longer
// than what is left, and then reports false.
func WalkAttrs(b []byte, fn func(typ uint16, v []byte)) bool {
	for len(b) >= unix.SizeofRtAttr {
		n := int(binary.NativeEndian.Uint16(b))
		if n < unix.SizeofRtAttr || n > len(b) {
			return false
		}
		fn(binary.NativeEndian.Uint16(b[2:])&^unix.NLA_F_NESTED, b[unix.SizeofRtAttr:n])
		b = b[min(Align(n), len(b)):]
	}
	return true
}

// Align rounds a netlink length up to the 4 bytes messages and attributes
// are aligned to.
func Align(n int) int { return (n + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1) }

// extFilterSkipStats asks the kernel to leave link statistics out of a
// dump (RTEXT_FILTER_SKIP_STATS in linux/rtnetlink.h), which cuts a
// quarter of the bytes.
const extFilterSkipStats = 1 << 3

// LinkDumpRequest asks for every link of the socket's network namespace,
// without their statistics.
func LinkDumpRequest() *nl.NetlinkRequest {
	req := nl.NewNetlinkRequest(unix.RTM_GETLINK, unix.NLM_F_DUMP)
	req.AddData(nl.NewIfInfomsg(unix.AF_UNSPEC))
	req.AddData(nl.NewRtAttr(unix.IFLA_EXT_MASK, nl.Uint32Attr(extFilterSkipStats)))
	return req
}
