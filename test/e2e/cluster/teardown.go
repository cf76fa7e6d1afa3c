package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// Down stops every process of the cluster by PID (SIGTERM, then SIGKILL
// after a grace period): the daemons, the pods and containerd's shims in
// the cluster's cgroups, anything else left in its mount namespace, and
// the holder, with which the namespace and all its mounts go. Then it
// removes the cgroups, destroys the virtual node with its network
// namespace and links, and removes the state directory. It also cleans up
// after a cluster that crashed half way up. Once the state directory is
// gone Down does nothing, and the Cluster is unusable.
func (c *Cluster) Down(ctx context.Context) error {
	if !fileExists(c.p.dir) {
		return nil // already down
	}
	return c.step("down, nothing left in "+c.p.dir, func() error {
		if err := c.downWorkers(ctx); err != nil {
			return err
		}
		if err := c.stopAll(ctx); err != nil {
			return err
		}
		if err := errors.Join(removeCgroups(c.st.CgroupRoot), c.destroyNode()); err != nil {
			return err
		}
		return c.removeStateDir()
	})
}

// downWorkers takes the workers down, at once, before the control plane:
// each removes its own state directory, which lies in the control plane's.
func (c *Cluster) downWorkers(ctx context.Context) error {
	if err := atOnce(c.workers, func(w *Cluster) error { return w.Down(ctx) }); err != nil {
		return err
	}
	c.workers = nil
	return nil
}

// stopAll stops the cluster in stages, each SIGTERM then SIGKILL after a
// grace period: kubelet and the controllers first, so that nothing starts
// more pods, with the pods, shims and whatever else runs in the cluster's
// cgroups or mount namespace; then kube-apiserver while etcd still
// answers it (it lingers without); then the rest and the holder.
func (c *Cluster) stopAll(ctx context.Context) error {
	ns, release := c.holdMountNS()
	defer release()
	strays, err := c.strays(ns, c.st.Processes)
	if err != nil {
		return err
	}
	stages := [][]*process{
		append(c.st.processes(kubelet, scheduler, controllerManager), strays...),
		c.st.processes(kubeAPIServer),
		c.st.processes(containerd, etcd, vnodeKernel),
	}
	if c.st.Holder != nil {
		stages = append(stages, []*process{c.st.Holder})
	}
	for _, stage := range stages {
		if err := stopProcesses(ctx, stage, stopGrace); err != nil {
			return err
		}
	}
	return c.sweep(ctx, ns)
}

// strays are the processes in the cluster's cgroups or in the mount
// namespace ns (held, see holdMountNS; "" for none) other than known ones
// and the caller: pods, shims, commands run there.
func (c *Cluster) strays(ns string, known []*process) ([]*process, error) {
	pids, err := cgroupPIDs(c.st.CgroupRoot)
	if err != nil {
		return nil, err
	}
	members, err := mountNSMembers(ns)
	if err != nil {
		return nil, err
	}
	var strays []*process
	for _, pid := range append(pids, members...) {
		isKnown := slices.ContainsFunc(known, func(p *process) bool { return p.PID == pid })
		isHolder := c.st.Holder != nil && c.st.Holder.PID == pid
		if isKnown || isHolder || pid == os.Getpid() || slices.ContainsFunc(strays, func(p *process) bool { return p.PID == pid }) {
			continue
		}
		if start, err := startTime(pid); err == nil {
			strays = append(strays, &process{Name: "pid " + strconv.Itoa(pid), PID: pid, StartTime: start})
		}
	}
	return strays, nil
}

// holdMountNS keeps the cluster's mount namespace alive until release
// and returns its name, or "" when no process known to be the cluster's
// is left in it. Held, the namespace's number names it alone: once the
// last process in a namespace ends, the kernel gives its number to the
// next new namespace, which may be another cluster's pod's, and processes
// found by the number would be strangers.
func (c *Cluster) holdMountNS() (ns string, release func()) {
	if c.st.MountNS == "" {
		return "", func() {}
	}
	var candidates []int
	if c.st.Holder.running() {
		candidates = append(candidates, c.st.Holder.PID)
	}
	if pids, err := cgroupPIDs(c.st.CgroupRoot); err == nil {
		candidates = append(candidates, pids...)
	}
	for _, pid := range candidates {
		if f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/mnt"); err == nil {
			if mountNSName(f) == c.st.MountNS {
				return c.st.MountNS, func() { f.Close() }
			}
			f.Close()
		}
	}
	return "", func() {}
}

// mountNSName names the mount namespace f holds as /proc/PID/ns/mnt does.
func mountNSName(f *os.File) string {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return ""
	}
	return fmt.Sprintf("mnt:[%d]", st.Ino)
}

// mountNSMembers lists the processes in the mount namespace named ns
// (as /proc/PID/ns/mnt reads), which the caller holds (holdMountNS);
// none when ns is "". It refuses the calling thread's own namespace,
// whose members Down must never take for the cluster's: the thread's,
// not the process's (see threadMountinfo).
func mountNSMembers(ns string) ([]int, error) {
	if ns == "" {
		return nil, nil
	}
	if own, err := os.Readlink("/proc/thread-self/ns/mnt"); err != nil || own == ns {
		return nil, fmt.Errorf("mount namespace %s: not the cluster's own (%v)", ns, err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/mnt"); err == nil && link == ns {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// sweep kills what was started while stopAll stopped the rest (a shim
// restarting a container, say) until nothing is left.
func (c *Cluster) sweep(ctx context.Context, ns string) error {
	ctx, cancel := context.WithTimeout(ctx, stopGrace)
	defer cancel()
	for {
		strays, err := c.strays(ns, nil)
		if err != nil || len(strays) == 0 {
			return err
		}
		for _, p := range strays {
			if err := p.signal(syscall.SIGKILL); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes keep appearing in the cluster's cgroups or namespace: %s", processNames(strays))
		case <-time.After(pollInterval):
		}
	}
}

func processNames(procs []*process) string {
	names := make([]string, len(procs))
	for i, p := range procs {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}

// destroyNode destroys the virtual node; when its state is lost, it
// deletes the network namespace by name and unmounts its tree.
func (c *Cluster) destroyNode() error {
	if c.node == nil {
		c.node, c.nodeErr = virtualnode.Open(c.p.node())
	}
	if c.node != nil {
		return c.node.Destroy()
	}
	var errs []error
	if c.st.Netns != "" && fileExists(netnsPath(c.st.Netns)) {
		errs = append(errs, netns.DeleteNamed(c.st.Netns))
	}
	points, err := mountPoints(threadMountinfo, c.p.node())
	return errors.Join(append(errs, err, unmountAll(points))...)
}

// removeStateDir removes the state directory once no mount is left in it
// on the host, so that removing never reaches into another file system.
func (c *Cluster) removeStateDir() error {
	points, err := mountPoints(threadMountinfo, c.p.dir)
	if err != nil {
		return err
	}
	if len(points) > 0 {
		return fmt.Errorf("not removing %s: still mounted there: %s", c.p.dir, strings.Join(points, ", "))
	}
	if !fileExists(c.p.state()) {
		return fmt.Errorf("not removing %s: it holds no cluster state", c.p.dir)
	}
	return os.RemoveAll(c.p.dir)
}

// unmountAll unmounts points, deepest first, detaching busy ones.
func unmountAll(points []string) error {
	var errs []error
	for i := len(points) - 1; i >= 0; i-- {
		if err := unix.Unmount(points[i], unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", points[i], err))
		}
	}
	return errors.Join(errs...)
}
