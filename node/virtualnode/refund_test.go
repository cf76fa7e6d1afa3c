package virtualnode_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/netnstest"
	"github.com/hwnet-io/hwnet/test/vnodetest"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// TestReturnNetdevs: VF netdevs moved into a network namespace come back
// to the node, with the tree's name, MAC and ifindex, when that namespace
// is destroyed, as a real VF's netdev comes back to the host; one moved
// out before ReturnNetdevs started too. A VF removed while its netdev was
// home stays removed.
func TestReturnNetdevs(t *testing.T) {
	n, h, vfs := nodeWithVFs(t, 3)
	pod := podNetns(t)
	moveInto(t, h, pod, vfs[0].Netdev.Name, "net1")
	returnNetdevs(t, n)
	moveInto(t, h, pod, vfs[1].Netdev.Name, "net2")
	if err := n.RemoveVF(t.Context(), vfs[2].Addr); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "del", pod).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", pod, err, out)
	}
	// The netns dies asynchronously: wait for the netdevs, which the
	// node's netns has not had since they were moved.
	for _, f := range vfs[:2] {
		waitLink(t, h, f.Netdev.Name)
		waitLink(t, h, f.Representor.Name)
	}
	// The events of the removal came first: it would be back by now.
	if _, err := h.LinkByName(vfs[2].Netdev.Name); err == nil {
		t.Errorf("%s, removed while home, came back", vfs[2].Netdev.Name)
	}
	checkLinksMatchTree(t, n, h)
}

// TestReturnNetdevsAfterLostNotifications: link notifications lost under
// load (ENOBUFS) leave a VF whose pod namespace died meanwhile without
// its pair; the resync that follows makes it again, and leaves a VF
// removed while home removed.
func TestReturnNetdevsAfterLostNotifications(t *testing.T) {
	n, h, vfs := nodeWithVFs(t, 2)
	pod := podNetns(t)
	moveInto(t, h, pod, vfs[0].Netdev.Name, "net1")
	if err := n.RemoveVF(t.Context(), vfs[1].Addr); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ip", "netns", "del", pod).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", pod, err, out)
	}
	// Nothing listens: the pair dies with the namespace, asynchronously.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := h.LinkByName(vfs[0].Representor.Name); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still there a minute after its peer's namespace was deleted", vfs[0].Representor.Name)
		}
	}
	if err := n.ResyncNetdevs(slog.New(slog.NewTextHandler(testWriter{t}, nil))); err != nil {
		t.Fatal(err)
	}
	waitLink(t, h, vfs[0].Netdev.Name)
	waitLink(t, h, vfs[0].Representor.Name)
	if _, err := h.LinkByName(vfs[1].Netdev.Name); err == nil {
		t.Errorf("%s, removed while home, came back", vfs[1].Netdev.Name)
	}
	checkLinksMatchTree(t, n, h)
}

// returnNetdevs runs the node's ReturnNetdevs until the test ends, and
// returns once it watches.
func returnNetdevs(t *testing.T, n *virtualnode.Node) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- n.ReturnNetdevs(ctx, slog.New(slog.NewTextHandler(testWriter{t}, nil)), func() { close(ready) })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatal(err)
	}
}

// TestReturnSFNetdevs: an SF's netdev moved into a namespace comes back
// when the namespace is destroyed, as a VF's does: the kernel gives every
// netdev that is no virtual link back to the host, an SF's as a VF's; and
// so does one whose return the notifications lost, at the resync.
func TestReturnSFNetdevs(t *testing.T) {
	vnodetest.RequireRoot(t)
	spec := rootSpec(t)
	spec.PFs, spec.NICs = sfSpec(spec.Name).PFs, nil
	n := build(t, spec, true)
	h := netlinkIn(t, n)
	sfs := n.Devices()[0].SFs
	pod := podNetns(t)
	moveInto(t, h, pod, sfs[0].Netdev.Name, "net1")
	returnNetdevs(t, n)
	moveInto(t, h, pod, sfs[1].Netdev.Name, "net2")
	if out, err := exec.Command("ip", "netns", "del", pod).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", pod, err, out)
	}
	for _, sf := range sfs {
		waitLink(t, h, sf.Netdev.Name)
		waitLink(t, h, sf.Representor.Name)
	}
	checkLinksMatchTree(t, n, h)
}

// nodeWithVFs builds the default node with its links, a netlink handle
// in its netns and its VFs with netdevs, at least want of them.
func nodeWithVFs(t *testing.T, want int) (*virtualnode.Node, *netlink.Handle, []virtualnode.Function) {
	t.Helper()
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	var vfs []virtualnode.Function
	for _, f := range n.Devices() {
		if f.IsVF() && f.Netdev != nil {
			vfs = append(vfs, f)
		}
	}
	if len(vfs) < want {
		t.Fatalf("the default spec has %d VFs with netdevs, want %d", len(vfs), want)
	}
	return n, netlinkIn(t, n), vfs
}

// podNetns adds a network namespace as a runtime does for a pod.
func podNetns(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("t%d-pod", os.Getpid())
	netnstest.Add(t, name)
	return name
}

// moveInto moves a link into the named netns and renames it there, as
// host-device does.
func moveInto(t *testing.T, h *netlink.Handle, netnsName, link, rename string) {
	t.Helper()
	l, err := h.LinkByName(link)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.GetFromName(netnsName)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if err := h.LinkSetNsFd(l, int(ns)); err != nil {
		t.Fatalf("move %s: %v", link, err)
	}
	in, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	moved, err := in.LinkByName(link)
	if err == nil {
		err = in.LinkSetName(moved, rename)
	}
	if err != nil {
		t.Fatalf("rename %s: %v", link, err)
	}
}

// waitLink waits for a link to be in the handle's netns and up.
func waitLink(t *testing.T, h *netlink.Handle, name string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var l netlink.Link
		if l, err = h.LinkByName(name); err == nil && l.Attrs().Flags&net.FlagUp != 0 {
			return
		}
	}
	t.Fatalf("%s not back and up: %v", name, err)
}

// testWriter sends log lines to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// TestDestroyBesideOtherNetnsUsers: nodes and other users of named network
// namespaces (ip netns add, as a test's pod or another cluster does) come
// and go in any order, and each node's Destroy leaves neither its netns
// name nor its bind mount, nor breaks the others' (issue 12 item 7: a later
// ip netns add bound /run/netns over the first node's netns, and Destroy
// failed EBUSY).
func TestDestroyBesideOtherNetnsUsers(t *testing.T) {
	vnodetest.RequireRoot(t)
	first := build(t, rootSpec(t), true)
	foreign := podNetns(t)
	secondSpec := rootSpec(t)
	secondSpec.Name += "b"
	second := build(t, secondSpec, true)
	for _, n := range []*virtualnode.Node{first, second} {
		name := n.NetnsName()
		if err := n.Destroy(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(virtualnode.NetnsDir, name)
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("netns %s is still there: %v", name, err)
		}
		if virtualnode.IsMountPoint(path) {
			t.Errorf("a mount is left at %s", path)
		}
		ns, err := netns.GetFromName(foreign)
		if err != nil {
			t.Fatalf("the other user's netns %s after destroying %s: %v", foreign, name, err)
		}
		ns.Close()
	}
	if out, err := exec.Command("ip", "netns", "del", foreign).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del %s: %v: %s", foreign, err, out)
	}
	if virtualnode.IsMountPoint(filepath.Join(virtualnode.NetnsDir, foreign)) {
		t.Errorf("a mount is left at the other user's netns %s", foreign)
	}
}

// TestDeleteNetnsNamesABuriedBind: when a bind of /run/netns over itself
// buries the node's netns bind (a tool that bound the directory while it
// was no mount point of its own), deleting the netns says so instead of
// failing EBUSY on the remove. The burying happens in a private mount
// namespace of a helper process, so the machine's /run/netns is untouched.
func TestDeleteNetnsNamesABuriedBind(t *testing.T) {
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$1" "$1" && exec "$0" -test.run='^$'`, os.Args[0], virtualnode.NetnsDir)
	cmd.Env = append(os.Environ(), deleteNetnsEnv+"="+n.NetnsName())
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "buried under a later bind mount of "+virtualnode.NetnsDir) {
		t.Errorf("deleting a buried netns: %v: %s; want an error saying it is buried", err, out)
	}
	ns, err := netns.GetFromName(n.NetnsName())
	if err != nil {
		t.Fatalf("the node's netns after the helper's private attempt: %v", err)
	}
	ns.Close()
}
