package watch

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// expectLinks reads link events until the latest event of each link named
// in want equals it (a zero Index in want matches any), and returns the
// events it read.
func expectLinks(t testing.TB, ch <-chan LinkEvent, want ...LinkEvent) []LinkEvent {
	t.Helper()
	var read []LinkEvent
	latest := map[string]LinkEvent{}
	deadline := time.After(eventTimeout)
	for !linksMatch(latest, want) {
		select {
		case ev := <-ch:
			read = append(read, ev)
			latest[ev.Name] = ev
		case <-deadline:
			t.Fatalf("after %d events, links not as wanted:\n%s", len(read), linkMismatches(latest, want))
		}
	}
	return read
}

func linksMatch(latest map[string]LinkEvent, want []LinkEvent) bool {
	return linkMismatches(latest, want) == ""
}

// linkMismatches describes up to five links whose latest event is not the
// one wanted.
func linkMismatches(latest map[string]LinkEvent, want []LinkEvent) string {
	var b strings.Builder
	n := 0
	for _, w := range want {
		got, ok := latest[w.Name]
		if w.Index == 0 {
			got.Index = 0
		}
		if ok && got == w {
			continue
		}
		if n++; n <= 5 {
			fmt.Fprintf(&b, "%s: got %+v (seen %t), want %+v\n", w.Name, got, ok, w)
		}
	}
	if n > 5 {
		fmt.Fprintf(&b, "and %d more\n", n-5)
	}
	return b.String()
}

func TestLinkWatcherReportsChanges(t *testing.T) {
	path, h := newNetns(t)
	addVeth(t, h, "a0", "b0")
	a, b := linkIndex(t, h, "a0"), linkIndex(t, h, "b0")
	w, err := WatchLinks(path)
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)

	// The pair existed before WatchLinks: the first event is the change.
	if err := h.LinkSetUp(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Index: a}}); err != nil {
		t.Fatal(err)
	}
	read := expectLinks(t, events, LinkEvent{Name: "a0", Index: a, OperState: "lowerlayerdown", Up: true})
	if read[0].Name != "a0" {
		t.Fatalf("first event %+v, want one of a0", read[0])
	}

	steps := []struct {
		name   string
		change func(*netlink.Handle) error
		want   []LinkEvent
	}{{
		name:   "peer up",
		change: func(h *netlink.Handle) error { return h.LinkSetUp(linkAt(b)) },
		want: []LinkEvent{
			{Name: "a0", Index: a, OperState: "up", Up: true},
			{Name: "b0", Index: b, OperState: "up", Up: true},
		},
	}, {
		name:   "down",
		change: func(h *netlink.Handle) error { return h.LinkSetDown(linkAt(a)) },
		want: []LinkEvent{
			{Name: "a0", Index: a, OperState: "down"},
			{Name: "b0", Index: b, OperState: "lowerlayerdown", Up: true},
		},
	}, {
		name:   "rename",
		change: func(h *netlink.Handle) error { return h.LinkSetName(linkAt(a), "a1") },
		want: []LinkEvent{
			{Name: "a0", Index: a, Deleted: true},
			{Name: "a1", Index: a, OperState: "down"},
		},
	}, {
		name:   "delete",
		change: func(h *netlink.Handle) error { return h.LinkDel(linkAt(a)) },
		want: []LinkEvent{
			{Name: "a1", Index: a, Deleted: true},
			{Name: "b0", Index: b, Deleted: true},
		},
	}, {
		name: "add",
		change: func(h *netlink.Handle) error {
			return h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "c0"}, PeerName: "d0"})
		},
		want: []LinkEvent{{Name: "c0", OperState: "down"}, {Name: "d0", OperState: "down"}},
	}}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := step.change(h); err != nil {
				t.Fatal(err)
			}
			expectLinks(t, events, step.want...)
		})
	}
}

func linkAt(index int) netlink.Link {
	return &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: index}}
}

// TestLinkWatcherBurst makes 2048 links and sets them up while nothing
// reads the events, then expects each link's final state.
func TestLinkWatcherBurst(t *testing.T) {
	path, h := newNetns(t)
	w, err := WatchLinks(path)
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)
	want := addPairsUp(t, h, 1024)
	expectLinks(t, events, want...)
}

// TestLinkWatcherResync shrinks the socket's buffer so that a burst
// overflows it: the watcher must dump the links again and report what the
// lost notifications said, deletions included.
func TestLinkWatcherResync(t *testing.T) {
	path, h := newNetns(t)
	for i := range 32 {
		addVeth(t, h, fmt.Sprintf("old%d", i), fmt.Sprintf("oldp%d", i))
	}
	w, err := WatchLinks(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(int(w.conn.file.Fd()), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 0); err != nil {
		t.Fatal(err)
	}
	want := addPairsUp(t, h, 128)
	for i := range 32 {
		if err := h.LinkDel(linkAt(linkIndex(t, h, fmt.Sprintf("old%d", i)))); err != nil {
			t.Fatal(err)
		}
		want = append(want, LinkEvent{Name: fmt.Sprintf("old%d", i), Deleted: true}, LinkEvent{Name: fmt.Sprintf("oldp%d", i), Deleted: true})
	}
	events := run(t, w.Run)
	expectLinks(t, events, want...)
}

// addPairsUp adds veth pairs and sets every end up, and returns the
// events that say so.
func addPairsUp(t *testing.T, h *netlink.Handle, pairs int) []LinkEvent {
	var want []LinkEvent
	for i := range pairs {
		a, b := fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)
		addVeth(t, h, a, b)
		for _, name := range []string{a, b} {
			index := linkIndex(t, h, name)
			if err := h.LinkSetUp(linkAt(index)); err != nil {
				t.Fatal(err)
			}
			want = append(want, LinkEvent{Name: name, Index: index, OperState: "up", Up: true})
		}
	}
	return want
}

// TestLinkWatcherVirtualNode follows what the agent sees on a virtual
// node: the links' states as the tree records them.
func TestLinkWatcherVirtualNode(t *testing.T) {
	vnodetest.RequireRoot(t)
	spec := virtualnode.DefaultSpec()
	spec.Name = "watch-links"
	node := vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), true)
	w, err := WatchLinks("/run/netns/" + node.NetnsName())
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)
	vfs := firstVFs(t, node, 2)
	ctx := context.Background()
	steps := []struct {
		name   string
		change func() error
		vf     virtualnode.Function
	}{
		{"down", func() error { return node.SetLinkUp(ctx, vfs[0].Netdev.Name, false) }, vfs[0]},
		{"up", func() error { return node.SetLinkUp(ctx, vfs[0].Netdev.Name, true) }, vfs[0]},
		{"remove", func() error { return node.RemoveVF(ctx, vfs[0].Addr) }, vfs[0]},
		{"bind vfio-pci", func() error { return node.BindDriver(ctx, vfs[1].Addr, "vfio-pci") }, vfs[1]},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			if err := step.change(); err != nil {
				t.Fatal(err)
			}
			expectLinks(t, events, nodeLinks(node, step.vf)...)
		})
	}
}

// nodeLinks returns the events that say what the node's tree says of a
// function's netdev and representor, now.
func nodeLinks(node *virtualnode.Node, was virtualnode.Function) []LinkEvent {
	now, ok := node.Device(was.Addr)
	if !ok || now.Netdev == nil {
		return []LinkEvent{
			{Name: was.Netdev.Name, Index: was.Netdev.Index, Deleted: true},
			{Name: was.Representor.Name, Index: was.Representor.Index, Deleted: true},
		}
	}
	var evs []LinkEvent
	for _, nd := range []*virtualnode.Netdev{now.Netdev, now.Representor} {
		evs = append(evs, LinkEvent{Name: nd.Name, Index: nd.Index, OperState: nd.OperState, Up: nd.Up})
	}
	return evs
}
