package watch

import (
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"
)

func TestLinkTable(t *testing.T) {
	eth0 := LinkEvent{Name: "eth0", Index: 2, OperState: "up", Up: true}
	eth1 := LinkEvent{Name: "eth1", Index: 3, OperState: "down"}
	renamed := LinkEvent{Name: "enp59s0f0v0", Index: 2, OperState: "up", Up: true}
	down := LinkEvent{Name: "eth0", Index: 2, OperState: "down"}
	gone := func(l LinkEvent) LinkEvent { return LinkEvent{Name: l.Name, Index: l.Index, Deleted: true} }

	// Each case starts from a table holding eth0 and eth1.
	tests := []struct {
		name  string
		apply func(t *linkTable, emit func(LinkEvent))
		want  []LinkEvent
	}{{
		name:  "unchanged state is not news",
		apply: func(t *linkTable, emit func(LinkEvent)) { t.apply(eth0, emit) },
	}, {
		name:  "changed state",
		apply: func(t *linkTable, emit func(LinkEvent)) { t.apply(down, emit) },
		want:  []LinkEvent{down},
	}, {
		name:  "rename deletes the old name",
		apply: func(t *linkTable, emit func(LinkEvent)) { t.apply(renamed, emit) },
		want:  []LinkEvent{gone(eth0), renamed},
	}, {
		name: "delete",
		apply: func(t *linkTable, emit func(LinkEvent)) {
			t.apply(LinkEvent{Name: "eth1", Index: 3, Deleted: true}, emit)
		},
		want: []LinkEvent{gone(eth1)},
	}, {
		name: "a complete dump deletes the links it missed",
		apply: func(t *linkTable, emit func(LinkEvent)) {
			t.startDump()
			t.apply(eth0, emit)
			t.endDump(true, emit)
		},
		want: []LinkEvent{gone(eth1)},
	}, {
		name: "an interrupted dump deletes nothing",
		apply: func(t *linkTable, emit func(LinkEvent)) {
			t.startDump()
			t.apply(eth0, emit)
			t.endDump(false, emit)
		},
	}, {
		name: "a link deleted during a dump is deleted once",
		apply: func(t *linkTable, emit func(LinkEvent)) {
			t.startDump()
			t.apply(eth0, emit)
			t.apply(eth1, emit)
			t.apply(LinkEvent{Name: "eth1", Index: 3, Deleted: true}, emit)
			t.endDump(true, emit)
		},
		want: []LinkEvent{gone(eth1)},
	}, {
		name: "a link created during a dump survives it",
		apply: func(t *linkTable, emit func(LinkEvent)) {
			t.startDump()
			t.apply(eth0, emit)
			t.apply(eth1, emit)
			t.apply(LinkEvent{Name: "eth2", Index: 4, OperState: "down"}, emit)
			t.endDump(true, emit)
		},
		want: []LinkEvent{{Name: "eth2", Index: 4, OperState: "down"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := &linkTable{byIndex: map[int]LinkEvent{2: eth0, 3: eth1}}
			var got []LinkEvent
			tt.apply(table, func(ev LinkEvent) { got = append(got, ev) })
			if !slices.Equal(got, tt.want) {
				t.Errorf("emitted %+v, want %+v", got, tt.want)
			}
			if table.dumping() {
				t.Error("still dumping")
			}
		})
	}
}

// linkMessage builds a RTM_NEWLINK or RTM_DELLINK message as the kernel
// sends it.
func linkMessage(typ uint16, index int32, flags uint32, attrs ...*nl.RtAttr) syscall.NetlinkMessage {
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index, msg.Flags = index, flags
	data := msg.Serialize()
	for _, a := range attrs {
		data = append(data, a.Serialize()...)
	}
	return syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: typ, Len: uint32(unix.NLMSG_HDRLEN + len(data))}, Data: data}
}

func TestParseLinkMessage(t *testing.T) {
	name := nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated("enp59s0f0v3"))
	tests := []struct {
		name   string
		msg    syscall.NetlinkMessage
		want   LinkEvent
		wantOK bool
	}{{
		name:   "up",
		msg:    linkMessage(unix.RTM_NEWLINK, 7, unix.IFF_UP|unix.IFF_BROADCAST, name, nl.NewRtAttr(unix.IFLA_OPERSTATE, []byte{6})),
		want:   LinkEvent{Name: "enp59s0f0v3", Index: 7, OperState: "up", Up: true},
		wantOK: true,
	}, {
		name:   "lower layer down",
		msg:    linkMessage(unix.RTM_NEWLINK, 7, unix.IFF_UP, nl.NewRtAttr(unix.IFLA_OPERSTATE, []byte{3}), name),
		want:   LinkEvent{Name: "enp59s0f0v3", Index: 7, OperState: "lowerlayerdown", Up: true},
		wantOK: true,
	}, {
		name:   "operstate out of range",
		msg:    linkMessage(unix.RTM_NEWLINK, 7, 0, name, nl.NewRtAttr(unix.IFLA_OPERSTATE, []byte{42})),
		want:   LinkEvent{Name: "enp59s0f0v3", Index: 7, OperState: "unknown"},
		wantOK: true,
	}, {
		name:   "deleted",
		msg:    linkMessage(unix.RTM_DELLINK, 7, 0, name),
		want:   LinkEvent{Name: "enp59s0f0v3", Index: 7, Deleted: true},
		wantOK: true,
	}, {
		name: "no name",
		msg:  linkMessage(unix.RTM_NEWLINK, 7, 0, nl.NewRtAttr(unix.IFLA_OPERSTATE, []byte{6})),
	}, {
		name: "truncated header",
		msg:  syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: unix.RTM_NEWLINK}, Data: make([]byte, 12)},
	}, {
		name: "attribute longer than the message",
		msg: func() syscall.NetlinkMessage {
			m := linkMessage(unix.RTM_NEWLINK, 7, 0, name)
			m.Data[unix.SizeofIfInfomsg] = 200
			return m
		}(),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := parseLinkMessage(&tt.msg)
			if ok != tt.wantOK || (ok && got != tt.want) {
				t.Errorf("parseLinkMessage = %+v, %t; want %+v, %t", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func FuzzParseLinkMessage(f *testing.F) {
	name := nl.NewRtAttr(unix.IFLA_IFNAME, nl.ZeroTerminated("eth0"))
	f.Add(uint16(unix.RTM_NEWLINK), linkMessage(unix.RTM_NEWLINK, 2, unix.IFF_UP, name, nl.NewRtAttr(unix.IFLA_OPERSTATE, []byte{6})).Data)
	f.Add(uint16(unix.RTM_DELLINK), linkMessage(unix.RTM_DELLINK, 2, 0, name).Data)
	f.Add(uint16(unix.RTM_NEWLINK), []byte{})
	f.Fuzz(func(t *testing.T, typ uint16, data []byte) {
		m := syscall.NetlinkMessage{Header: syscall.NlMsghdr{Type: typ, Len: uint32(unix.NLMSG_HDRLEN + len(data))}, Data: data}
		ev, ok := parseLinkMessage(&m)
		if ok && ev.Name == "" {
			t.Errorf("ok without a name: %+v", ev)
		}
	})
}

func TestWatchLinksBadNetns(t *testing.T) {
	path := t.TempDir() + "/no-such-netns"
	w, err := WatchLinks(path)
	if err == nil {
		w.Close()
		t.Fatal("WatchLinks succeeded")
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
}
