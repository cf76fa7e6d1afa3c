package watch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
	"golang.org/x/sys/unix"
)

// Messages as the kernel sends them on NETLINK_KOBJECT_UEVENT group 1, in
// the order enabling a VF on an E810 makes them.
const (
	vfAddMsg = "add@/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0\x00ACTION=add\x00" +
		"DEVPATH=/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0\x00SUBSYSTEM=pci\x00" +
		"PCI_CLASS=20000\x00PCI_ID=8086:1889\x00PCI_SUBSYS_ID=8086:0000\x00PCI_SLOT_NAME=0000:3b:01.0\x00" +
		"MODALIAS=pci:v00008086d00001889sv00008086sd00000000bc02sc00i00\x00SEQNUM=5120\x00"
	vfBindMsg = "bind@/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0\x00ACTION=bind\x00" +
		"DEVPATH=/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0\x00SUBSYSTEM=pci\x00DRIVER=iavf\x00" +
		"PCI_CLASS=20000\x00PCI_ID=8086:1889\x00PCI_SLOT_NAME=0000:3b:01.0\x00SEQNUM=5131\x00"
	netAddMsg = "add@/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0\x00ACTION=add\x00" +
		"DEVPATH=/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0\x00SUBSYSTEM=net\x00" +
		"INTERFACE=eth0\x00IFINDEX=12\x00SEQNUM=5127\x00"
	netMoveMsg = "move@/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/enp59s0f0v0\x00ACTION=move\x00" +
		"DEVPATH=/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/enp59s0f0v0\x00SUBSYSTEM=net\x00" +
		"DEVPATH_OLD=/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0\x00" +
		"INTERFACE=enp59s0f0v0\x00IFINDEX=12\x00SEQNUM=5140\x00"
	queueAddMsg = "add@/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0/queues/rx-0\x00ACTION=add\x00" +
		"DEVPATH=/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0/queues/rx-0\x00SUBSYSTEM=queues\x00SEQNUM=5128\x00"
	pfChangeMsg = "change@/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0\x00ACTION=change\x00" +
		"DEVPATH=/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0\x00SUBSYSTEM=pci\x00SEQNUM=5200\x00"
)

func TestParseUEvent(t *testing.T) {
	tests := []struct {
		name        string
		msg         string
		want        UEvent
		wantWatched bool
		wantErr     string
	}{{
		name: "VF added",
		msg:  vfAddMsg,
		want: UEvent{Action: "add", DevPath: "/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0", Subsystem: "pci",
			SeqNum: 5120, PCISlot: "0000:3b:01.0"},
		wantWatched: true,
	}, {
		name: "VF bound",
		msg:  vfBindMsg,
		want: UEvent{Action: "bind", DevPath: "/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0", Subsystem: "pci",
			SeqNum: 5131, Driver: "iavf", PCISlot: "0000:3b:01.0"},
		wantWatched: true,
	}, {
		name: "netdev added",
		msg:  netAddMsg,
		want: UEvent{Action: "add", DevPath: "/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0", Subsystem: "net",
			SeqNum: 5127, Interface: "eth0"},
		wantWatched: true,
	}, {
		name: "netdev renamed",
		msg:  netMoveMsg,
		want: UEvent{Action: "move", DevPath: "/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/enp59s0f0v0", Subsystem: "net",
			SeqNum: 5140, Interface: "enp59s0f0v0"},
		wantWatched: true,
	}, {
		name:        "PF changed (sriov_numvfs written)",
		msg:         pfChangeMsg,
		want:        UEvent{Action: "change", DevPath: "/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", Subsystem: "pci", SeqNum: 5200},
		wantWatched: true,
	}, {
		name: "queue added: parsed, not watched",
		msg:  queueAddMsg,
		want: UEvent{Action: "add", DevPath: "/devices/pci0000:3a/0000:3a:00.0/0000:3b:01.0/net/eth0/queues/rx-0",
			Subsystem: "queues", SeqNum: 5128},
	}, {
		name: "PCI function offline: not watched",
		msg:  "offline@/devices/pci0000:00/0000:00:03.0\x00ACTION=offline\x00SUBSYSTEM=pci\x00",
		want: UEvent{Action: "offline", DevPath: "/devices/pci0000:00/0000:00:03.0", Subsystem: "pci"},
	}, {
		name:    "udev's rebroadcast",
		msg:     "libudev\x00\xfe\xed\xca\xfe\x28\x00\x00\x00",
		wantErr: `uevent header "libudev": want ACTION@/DEVPATH`,
	}, {
		name:    "empty",
		msg:     "",
		wantErr: `uevent header "": want ACTION@/DEVPATH`,
	}, {
		name:    "no action",
		msg:     "@/devices/x\x00SUBSYSTEM=pci\x00",
		wantErr: "want ACTION@/DEVPATH",
	}, {
		name:    "relative devpath",
		msg:     "add@devices/x\x00SUBSYSTEM=pci\x00",
		wantErr: "want ACTION@/DEVPATH",
	}, {
		name:    "field without =",
		msg:     "add@/devices/x\x00SUBSYSTEM=pci\x00garbage\x00",
		wantErr: `uevent add@/devices/x: field "garbage": want KEY=VALUE`,
	}, {
		name:    "ACTION differs",
		msg:     "add@/devices/x\x00ACTION=remove\x00SUBSYSTEM=pci\x00",
		wantErr: `ACTION "remove" differs from the header's "add"`,
	}, {
		name:    "DEVPATH differs",
		msg:     "add@/devices/x\x00DEVPATH=/devices/y\x00SUBSYSTEM=pci\x00",
		wantErr: `DEVPATH "/devices/y" differs from the header's "/devices/x"`,
	}, {
		name:    "bad SEQNUM",
		msg:     "add@/devices/x\x00SUBSYSTEM=pci\x00SEQNUM=-1\x00",
		wantErr: `SEQNUM "-1": not a number`,
	}, {
		name:    "no SUBSYSTEM",
		msg:     "add@/devices/x\x00ACTION=add\x00",
		wantErr: "uevent add@/devices/x: no SUBSYSTEM",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUEvent([]byte(tt.msg))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("parseUEvent = %+v, want %+v", got, tt.want)
			}
			if got.watched() != tt.wantWatched {
				t.Errorf("watched = %t, want %t", got.watched(), tt.wantWatched)
			}
		})
	}
}

func FuzzParseUEvent(f *testing.F) {
	for _, msg := range []string{vfAddMsg, vfBindMsg, netAddMsg, netMoveMsg, queueAddMsg, pfChangeMsg, "libudev\x00", ""} {
		f.Add([]byte(msg))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		ev, err := parseUEvent(msg)
		if err != nil {
			return
		}
		if ev.Action == "" || !strings.HasPrefix(ev.DevPath, "/") || ev.Subsystem == "" {
			t.Errorf("parsed %q into %+v, which lacks an action, device path or subsystem", msg, ev)
		}
	})
}

// TestUEventWatcher opens the kernel's uevent socket in a network
// namespace and expects the uevents of a veth pair made and deleted
// there; the queues' uevents that come with them are not watched.
func TestUEventWatcher(t *testing.T) {
	path, h := newNetns(t)
	w, err := WatchUEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)
	addVeth(t, h, "a0", "b0")
	expectUEvents(t, events, map[string]string{"a0": "add", "b0": "add"})
	if err := h.LinkDel(linkAt(linkIndex(t, h, "a0"))); err != nil {
		t.Fatal(err)
	}
	expectUEvents(t, events, map[string]string{"a0": "remove", "b0": "remove"})
}

// TestUEventWatcherVirtualNode: a virtual node announces the PCI changes
// of its generated tree as the kernel does, on the namespace's uevent
// socket, and only once the tree shows them: VFs that go are unbound and
// removed, VFs that come are added and bound to their driver.
func TestUEventWatcherVirtualNode(t *testing.T) {
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), true)
	w, err := WatchUEvents("/run/netns/" + node.NetnsName())
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)
	const pf = "0000:3b:00.0"
	want := map[string]string{}
	for _, f := range node.Devices() {
		if f.PF == pf {
			want[f.Addr] = "remove"
		}
	}
	if err := node.SetNumVFs(context.Background(), pf, 2); err != nil {
		t.Fatal(err)
	}
	for _, f := range node.Devices() {
		if f.PF == pf {
			want[f.Addr] = "bind " + f.Driver
		}
	}
	got := map[string]string{}
	for !maps.Equal(got, want) {
		ev := receive(t, events)
		if ev.Subsystem != "pci" {
			continue // the veths' own uevents, from the kernel
		}
		got[ev.PCISlot] = strings.TrimSpace(ev.Action + " " + ev.Driver)
	}
	// Each function's last uevent is what the tree shows.
	for addr, last := range got {
		driver, err := os.Readlink(filepath.Join(node.SysRoot(), "bus/pci/devices", addr, "driver"))
		if shows := strings.TrimSpace("bind " + filepath.Base(driver)); (last == "remove") != errors.Is(err, fs.ErrNotExist) || (last != "remove" && shows != last) {
			t.Errorf("%s: last uevent %q, but the tree shows driver %q (%v)", addr, last, driver, err)
		}
	}
}

// TestUEventWatcherOverflow lets uevents overflow a tiny socket buffer
// before Run reads it: Run must say events were lost.
func TestUEventWatcherOverflow(t *testing.T) {
	path, h := newNetns(t)
	w, err := WatchUEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(int(w.conn.file.Fd()), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 32 {
		addVeth(t, h, fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i))
	}
	events := run(t, w.Run)
	for ev := receive(t, events); !ev.Overflow; ev = receive(t, events) {
		if ev.Subsystem != "net" {
			t.Errorf("unwatched event %+v", ev)
		}
	}
}

// expectUEvents reads uevents until each interface in want has had a net
// uevent with the action wanted.
func expectUEvents(t *testing.T, events <-chan UEvent, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for !maps.Equal(got, want) {
		ev := receive(t, events)
		if ev.Subsystem != "net" || !strings.HasSuffix(ev.DevPath, "/net/"+ev.Interface) {
			t.Errorf("unexpected uevent %+v", ev)
		}
		if _, ok := want[ev.Interface]; ok {
			got[ev.Interface] = ev.Action
		}
	}
}
