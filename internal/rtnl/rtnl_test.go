package rtnl

import (
	"encoding/binary"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// attr encodes one rtattr, padded to 4 bytes.
func attr(typ uint16, v []byte) []byte {
	b := binary.NativeEndian.AppendUint16(nil, uint16(unix.SizeofRtAttr+len(v)))
	b = binary.NativeEndian.AppendUint16(b, typ)
	b = append(b, v...)
	return append(b, make([]byte, Align(len(b))-len(b))...)
}

func linkMessage(index int32, flags uint32, attrs ...[]byte) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	binary.NativeEndian.PutUint32(b[4:], uint32(index))
	binary.NativeEndian.PutUint32(b[8:], flags)
	return append(b, slices.Concat(attrs...)...)
}

func TestParseLink(t *testing.T) {
	name := attr(unix.IFLA_IFNAME, []byte("enp59s0f0v3\x00"))
	truncated := linkMessage(7, 0, name)
	truncated[unix.SizeofIfInfomsg] = 200
	for _, tc := range []struct {
		name   string
		msg    []byte
		want   Link
		wantOK bool
	}{
		{"up with MTU", linkMessage(7, unix.IFF_UP|unix.IFF_BROADCAST, name, attr(unix.IFLA_MTU, binary.NativeEndian.AppendUint32(nil, 9000)),
			attr(unix.IFLA_OPERSTATE, []byte{6})), Link{Name: "enp59s0f0v3", Index: 7, Up: true, OperState: "up", MTU: 9000}, true},
		{"lower layer down", linkMessage(7, unix.IFF_UP, attr(unix.IFLA_OPERSTATE, []byte{3}), name),
			Link{Name: "enp59s0f0v3", Index: 7, Up: true, OperState: "lowerlayerdown"}, true},
		{"operstate out of range", linkMessage(7, 0, name, attr(unix.IFLA_OPERSTATE, []byte{42})),
			Link{Name: "enp59s0f0v3", Index: 7, OperState: "unknown"}, true},
		{"no operstate", linkMessage(7, 0, name), Link{Name: "enp59s0f0v3", Index: 7}, true},
		{"no name", linkMessage(7, 0, attr(unix.IFLA_OPERSTATE, []byte{6})), Link{}, false},
		{"short header", make([]byte, unix.SizeofIfInfomsg-1), Link{}, false},
		{"attribute longer than the message", truncated, Link{}, false},
	} {
		got, ok := ParseLink(tc.msg)
		if ok != tc.wantOK || (ok && got != tc.want) {
			t.Errorf("%s: ParseLink = %+v, %t; want %+v, %t", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

// FuzzParseLink: what the kernel sends is read in place; no input may
// panic, and a link is never accepted without a name.
func FuzzParseLink(f *testing.F) {
	f.Add(linkMessage(2, unix.IFF_UP, attr(unix.IFLA_IFNAME, []byte("eth0\x00")), attr(unix.IFLA_OPERSTATE, []byte{6})))
	f.Add([]byte{0xff, 0xff, 0, 0, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if l, ok := ParseLink(b); ok && l.Name == "" {
			t.Errorf("accepted without a name: %+v", l)
		}
		WalkAttrs(b, func(uint16, []byte) {})
	})
}
