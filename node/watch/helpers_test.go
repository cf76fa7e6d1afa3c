package watch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// eventTimeout bounds every wait for an event, so that a missing one
// fails its test instead of hanging it; none of these tests measures time.
const eventTimeout = 60 * time.Second

// newNetns makes a network namespace for one test and returns its path
// and a netlink handle in it.
func newNetns(t testing.TB) (string, *netlink.Handle) {
	t.Helper()
	vnodetest.RequireRoot(t)
	name := fmt.Sprintf("hwnet-watch-%d-%s", os.Getpid(), regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(t.Name(), "-"))
	made := make(chan error, 1)
	go func() {
		// NewNamed moves the thread into the new namespace; the thread
		// goes back to the scheduler only once it is out again.
		runtime.LockOSThread()
		own, err := netns.Get()
		if err != nil {
			made <- err
			return
		}
		defer own.Close()
		ns, err := netns.NewNamed(name)
		if err != nil {
			made <- err
			return
		}
		ns.Close()
		if err := netns.Set(own); err != nil {
			made <- err
			return
		}
		runtime.UnlockOSThread()
		made <- nil
	}()
	if err := <-made; err != nil {
		t.Fatalf("create netns %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	path := filepath.Join("/run/netns", name)
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return path, h
}

// addVeth adds a veth pair, both ends down.
func addVeth(t testing.TB, h *netlink.Handle, name, peer string) {
	t.Helper()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		t.Fatalf("add veth %s/%s: %v", name, peer, err)
	}
}

// linkIndex returns the ifindex of the link called name.
func linkIndex(t testing.TB, h *netlink.Handle, name string) int {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return l.Attrs().Index
}

// run starts Run on a goroutine until the test ends and fails the test if
// Run returns an error.
func run[T any](t testing.TB, runFn func(context.Context, chan<- T) error) <-chan T {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan T)
	done := make(chan error, 1)
	go func() { done <- runFn(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out
}

// receive returns the next value from ch, failing the test after
// eventTimeout.
func receive[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(eventTimeout):
		var zero T
		t.Fatalf("no %T within %v", zero, eventTimeout)
		return zero
	}
}

// expectNone fails the test if ch delivers within d.
func expectNone[T any](t testing.TB, ch <-chan T, d time.Duration) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %+v", v)
	case <-time.After(d):
	}
}

// firstVFs returns the addresses of the first n VFs with netdevs.
func firstVFs(t testing.TB, node *virtualnode.Node, n int) []virtualnode.Function {
	t.Helper()
	var vfs []virtualnode.Function
	for _, f := range node.Devices() {
		if f.IsVF() && f.Netdev != nil && len(vfs) < n {
			vfs = append(vfs, f)
		}
	}
	if len(vfs) < n {
		t.Fatalf("node has %d VFs with netdevs, want %d", len(vfs), n)
	}
	return vfs
}
