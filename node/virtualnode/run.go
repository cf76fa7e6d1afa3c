package virtualnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
)

// Run calls fn inside the node: on an OS thread of its own that has a
// private mount namespace with the tree bound over /sys and DevRoot laid
// over /dev (as it is when Run starts), and, with links, the node's
// network namespace. Programs that fn starts with os/exec inherit both, so
// unmodified tools see the virtual hardware. Goroutines that fn starts do
// not: they run on other threads.
//
// Run needs root. It returns when fn does; fn should itself watch ctx.
// The thread is never handed back to the Go scheduler: it exits with the
// goroutine, and its namespaces vanish with it and with its children.
func (n *Node) Run(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return osthread.Run(func() error {
		if err := n.enter(); err != nil {
			return fmt.Errorf("enter virtual node %s: %w", n.st.Name, err)
		}
		return fn()
	})
}

// enter moves the calling, locked thread into the node's namespaces.
// Propagation from the host stays on (slave, not private): a netns that
// the host binds later under /run/netns must show up inside, or nsenter
// into it fails. /sys is replaced whole, because the tree's relative links
// climb to its root; /dev keeps the host's devices.
func (n *Node) enter() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	if err := unix.Mount(n.SysRoot(), "/sys", "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s over /sys: %w", n.SysRoot(), err)
	}
	if err := overlayDev(n.DevRoot()); err != nil {
		return err
	}
	if n.st.Netns == "" {
		return nil
	}
	ns, err := netns.GetFromName(n.st.Netns)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", n.st.Netns, err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("enter netns %s: %w", n.st.Netns, err)
	}
	return nil
}

// Exec runs cmd inside the node (see Run) and waits for it. Build cmd with
// exec.CommandContext to tie it to ctx.
func (n *Node) Exec(ctx context.Context, cmd *exec.Cmd) error {
	return n.Run(ctx, cmd.Run)
}

// overlayDev lays devRoot over /dev in a read-only overlay, so that
// /dev/vfio/<group> and /dev/infiniband/uverbsN appear next to the host's
// devices. The overlay would hide the mounts below /dev (pts, shm), so
// they are held open through it and bound again on top.
func overlayDev(devRoot string) error {
	subs, err := mountsBelow("/dev/")
	if err != nil {
		return err
	}
	fds := make([]int, 0, len(subs))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for _, m := range subs {
		fd, err := unix.Open(m, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", m, err)
		}
		fds = append(fds, fd)
	}
	opts := "lowerdir=" + overlayEscaper.Replace(devRoot) + ":/dev"
	if err := unix.Mount("overlay", "/dev", "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay %s on /dev: %w", devRoot, err)
	}
	for i, m := range subs {
		if err := unix.Mount("/proc/thread-self/fd/"+strconv.Itoa(fds[i]), m, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s again over the /dev overlay: %w", m, err)
		}
	}
	return nil
}

// overlayEscaper escapes what separates overlayfs's options and layers.
var overlayEscaper = strings.NewReplacer(`\`, `\\`, ":", `\:`, ",", `\,`)

// mountsBelow lists the outermost mount points under prefix in the calling
// thread's mount namespace; the mounts below them come along with MS_REC.
func mountsBelow(prefix string) ([]string, error) {
	data, err := os.ReadFile("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	var points []string
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], prefix) {
			points = append(points, f[4])
		}
	}
	slices.Sort(points)
	points = slices.Compact(points)
	return slices.DeleteFunc(points, func(p string) bool {
		return slices.ContainsFunc(points, func(q string) bool { return strings.HasPrefix(p, q+"/") })
	}), nil
}
