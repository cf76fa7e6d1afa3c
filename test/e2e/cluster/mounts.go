package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// setUpMounts lays out the cluster's mount namespace (see the package
// documentation). It runs on a thread inside the namespaces.
func setUpMounts(p paths, virtualSys string) error {
	stateDir, err := unix.Open(p.dir, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", p.dir, err)
	}
	defer unix.Close(stateDir)
	steps := []func() error{
		// Before shareRoot: a mount cannot move away from a shared parent.
		func() error { return composeSys(p.sysStaging(), virtualSys) },
		shareRoot,
		func() error { return overlayWithBinds(p, "/dev", p.dev(), deviceBinds(p.dev())) },
		func() error { return overlayWithBinds(p, "/etc", "", []subdirBind{{"cni/net.d", p.cniConf()}}) },
		func() error { return overlayWithBinds(p, "/opt", "", []subdirBind{{"cni/bin", p.cniBin()}}) },
		func() error { return maskSysctls(p.configFile("sysctl")) },
		func() error { return sharedMount("tmpfs", "/run", "tmpfs", 0, "mode=0755") },
		// Kubelet removes the pod log directories of pods it does not know:
		// two clusters on one host must not share /var/log/pods. Before
		// /var/lib, which may hide the state directory.
		func() error { return sharedMount(p.varLog(), "/var/log", "", unix.MS_BIND, "") },
		func() error { return sharedMount(p.varLib(), "/var/lib", "", unix.MS_BIND, "") },
		func() error { return reexpose(stateDir, p.dir) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// subdirBind binds Source over the subdirectory Sub of an overlay.
type subdirBind struct{ Sub, Source string }

// deviceBinds binds the device directories of dev over the /dev overlay,
// so that devices SyncDevices adds show: an overlay does not promise to
// show later changes to its layers.
func deviceBinds(dev string) []subdirBind {
	var binds []subdirBind
	for _, dir := range virtualnode.DeviceDirs() {
		binds = append(binds, subdirBind{dir, filepath.Join(dev, dir)})
	}
	return binds
}

// shareRoot makes every mount of the namespace shared among the namespace
// and its copies, as / is on a systemd host: containerd refuses
// HostToContainer propagation (hwnet-agent's /var/run/netns) from a
// private source. The host keeps its mounts private (or the namespace
// stays their slave, as the holder made it), so nothing reaches the host.
func shareRoot() error {
	if err := unix.Mount("", "/", "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	return nil
}

// overlayWithBinds lays a writable overlay over target, with extraLower
// (if not "") above target as lower layers and the writes going to the
// state directory, then binds each Source over its place in it. Writable,
// because runc makes mount points in the /dev a pod mounts from the host
// (/dev/termination-log). The mounts that were below target (/dev/pts,
// /dev/shm) are held open and bound again on top.
func overlayWithBinds(p paths, target, extraLower string, binds []subdirBind) error {
	below, fds, err := holdMountsBelow(target)
	defer closeAll(fds)
	if err != nil {
		return err
	}
	lower := overlayEscaper.Replace(target)
	if extraLower != "" {
		lower = overlayEscaper.Replace(extraLower) + ":" + lower
	}
	opts := "lowerdir=" + lower + ",upperdir=" + overlayEscaper.Replace(p.overlayUpper(target)) +
		",workdir=" + overlayEscaper.Replace(p.overlayWork(target))
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on %s (%s): %w", target, opts, err)
	}
	for i, m := range below {
		if err := bindMount(fdPath(fds[i]), m); err != nil {
			return fmt.Errorf("bind %s again over the %s overlay: %w", m, target, err)
		}
	}
	for _, b := range binds {
		if err := os.MkdirAll(filepath.Join(target, b.Sub), 0o755); err != nil {
			return fmt.Errorf("mount point: %w", err)
		}
		if err := bindMount(b.Source, filepath.Join(target, b.Sub)); err != nil {
			return err
		}
	}
	return nil
}

// holdMountsBelow opens the outermost mounts below target, so that they
// can be bound again once something is mounted over target.
func holdMountsBelow(target string) ([]string, []int, error) {
	below, err := mountsBelow(target)
	if err != nil {
		return nil, nil, err
	}
	fds := make([]int, 0, len(below))
	for _, m := range below {
		fd, err := unix.Open(m, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fds, fmt.Errorf("open %s: %w", m, err)
		}
		fds = append(fds, fd)
	}
	return below, fds, nil
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// overlayEscaper escapes what separates overlayfs's options and layers.
var overlayEscaper = strings.NewReplacer(`\`, `\\`, ":", `\:`, ",", `\,`)

// mountsBelow lists the outermost mount points under target in the
// calling thread's mount namespace; the mounts below them come along with
// MS_REC.
func mountsBelow(target string) ([]string, error) {
	points, err := mountPoints(threadMountinfo, target)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(points, func(p string) bool {
		return p == target || slices.ContainsFunc(points, func(q string) bool {
			return q != target && strings.HasPrefix(p, q+"/")
		})
	}), nil
}

// threadMountinfo lists the mounts of the calling thread's namespace.
// Never /proc/self's, which are the main thread's: a goroutine that
// entered the cluster (inNamespaces) and ended on the main thread leaves
// it there, as Go parks an ended locked main thread instead of ending it.
// Any thread that is not locked is in the caller's own namespaces.
const threadMountinfo = "/proc/thread-self/mountinfo"

// mountPoints lists, sorted, the mount points at or below dir that a
// mountinfo file shows.
func mountPoints(mountinfo, dir string) ([]string, error) {
	data, err := os.ReadFile(mountinfo)
	if err != nil {
		return nil, err
	}
	var points []string
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			points = append(points, f[4])
		}
	}
	slices.Sort(points)
	return slices.Compact(points), nil
}

func fdPath(fd int) string { return "/proc/thread-self/fd/" + strconv.Itoa(fd) }

func bindMount(source, target string) error {
	if err := unix.Mount(source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", source, target, err)
	}
	return nil
}

// sharedMount mounts and makes the mount shared within the namespace:
// containers whose volumes ask for HostToContainer propagation need a
// shared source, and pod network namespaces mounted under /run later must
// reach them.
func sharedMount(source, target, fstype string, flags uintptr, data string) error {
	if err := unix.Mount(source, target, fstype, flags, data); err != nil {
		return fmt.Errorf("mount %s on %s: %w", source, target, err)
	}
	if err := unix.Mount("", target, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s shared: %w", target, err)
	}
	return nil
}

// reexpose binds the state directory, held open as fd, at its own path
// again when the /run tmpfs or the /var/lib bind hid it.
func reexpose(fd int, dir string) error {
	visible, err := sameFile(fdPath(fd), dir)
	if err == nil && visible {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("state directory mount point: %w", err)
	}
	return bindMount(fdPath(fd), dir)
}

// kernelTunables are the sysctls kubelet sets unless they already have
// these values. They are not namespaced: kubelet would change the host's.
// The cluster's mount namespace shows these values instead, in files bound
// over /proc/sys, so kubelet finds nothing to change.
func kernelTunables() []struct{ Key, Value string } {
	return []struct{ Key, Value string }{
		{"vm/overcommit_memory", "1"},
		{"vm/panic_on_oom", "0"},
		{"kernel/panic", "10"},
		{"kernel/panic_on_oops", "1"},
		{"kernel/keys/root_maxkeys", "1000000"},
		{"kernel/keys/root_maxbytes", "25000000"},
	}
}

// writeKernelTunables writes the values maskSysctls binds into dir.
func writeKernelTunables(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, t := range kernelTunables() {
		file := filepath.Join(dir, strings.ReplaceAll(t.Key, "/", "."))
		if err := os.WriteFile(file, []byte(t.Value+"\n"), 0o444); err != nil {
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	return nil
}

func maskSysctls(dir string) error {
	for _, t := range kernelTunables() {
		source := filepath.Join(dir, strings.ReplaceAll(t.Key, "/", "."))
		if err := bindMount(source, filepath.Join("/proc/sys", t.Key)); err != nil {
			return err
		}
	}
	return nil
}
