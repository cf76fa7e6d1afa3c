package virtualnode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Device numbers of the character devices MirrorDevices gives the
// node's device files. RDMA and the VFIO container use the numbers the
// kernel gives them; VFIO groups, UIO devices and rdma_cm get numbers this
// kernel has no driver for (as it has no VFIO, UIO or RDMA), so a pod that
// opens one gets ENXIO rather than some other device.
const (
	miscMajor      = 10
	vfioMinor      = 196
	rdmaCMMinor    = 254
	vfioGroupMajor = 511
	uioMirrorMajor = 510
	// maxDeviceIndex bounds the N of vfio/N, uverbsN and the others.
	maxDeviceIndex = 1 << 16
)

// DeviceDirs are the directories of the node's device tree whose devices
// MirrorDevices keeps: a cluster binds them over its /dev, so that the
// devices added show.
func DeviceDirs() []string { return []string{"vfio", "infiniband"} }

// charDevice returns the major and minor number for the virtual node's
// device file at rel, its path under /dev ("vfio/8", "infiniband/uverbs0").
func charDevice(rel string) (major, minor uint32, err error) {
	dir, name := filepath.Split(rel)
	switch {
	case rel == "vfio/vfio":
		return miscMajor, vfioMinor, nil
	case rel == "infiniband/rdma_cm":
		return miscMajor, rdmaCMMinor, nil
	case dir == "vfio/":
		return indexed(rel, strings.TrimPrefix(name, "noiommu-"), vfioGroupMajor, 0)
	case dir == "infiniband/" && strings.HasPrefix(name, "uverbs"):
		return indexed(rel, strings.TrimPrefix(name, "uverbs"), infinibandMajor, uverbsMinorBase)
	case dir == "infiniband/" && strings.HasPrefix(name, "umad"):
		return indexed(rel, strings.TrimPrefix(name, "umad"), infinibandMajor, 0)
	case dir == "infiniband/" && strings.HasPrefix(name, "issm"):
		return indexed(rel, strings.TrimPrefix(name, "issm"), infinibandMajor, issmMinorBase)
	case dir == "" && strings.HasPrefix(name, "uio"):
		return indexed(rel, strings.TrimPrefix(name, "uio"), uioMirrorMajor, 0)
	}
	return 0, 0, fmt.Errorf("device file %q: not a VFIO, RDMA or UIO device the virtual node knows", rel)
}

func indexed(rel, digits string, major, base uint32) (uint32, uint32, error) {
	n, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || n >= maxDeviceIndex || strconv.FormatUint(n, 10) != digits {
		return 0, 0, fmt.Errorf("device file %q: index %q is not a number below %d", rel, digits, maxDeviceIndex)
	}
	return major, base + uint32(n), nil
}

// MirrorDevices makes dst hold a character device for every device file
// of the node, and nothing else in DeviceDirs: what devtmpfs shows of the
// devices a driver made, for a /dev that containers open.
func (n *Node) MirrorDevices(dst string) error {
	return mirrorDevices(n.DevRoot(), dst)
}

func mirrorDevices(devRoot, dst string) error {
	want := map[string]bool{}
	err := filepath.WalkDir(devRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, err := filepath.Rel(devRoot, path)
		if err != nil {
			return err
		}
		want[rel] = true
		return makeCharDevice(filepath.Join(dst, rel), rel)
	})
	if err != nil {
		return fmt.Errorf("device files of %s: %w", devRoot, err)
	}
	return removeUnwanted(dst, want)
}

func makeCharDevice(path, rel string) error {
	major, minor, err := charDevice(rel)
	if err != nil {
		return err
	}
	dev := unix.Mkdev(major, minor)
	var st unix.Stat_t
	if unix.Lstat(path, &st) == nil {
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == dev {
			return nil
		}
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(dev)); err != nil {
		return fmt.Errorf("mknod %s: %w", path, err)
	}
	return os.Chmod(path, 0o666) // past the umask
}

// removeUnwanted removes the devices in dst's DeviceDirs that the virtual
// node no longer has, and makes sure those directories exist: they are
// mount points.
func removeUnwanted(dst string, want map[string]bool) error {
	var errs []error
	for _, dir := range DeviceDirs() {
		if err := os.MkdirAll(filepath.Join(dst, dir), 0o755); err != nil {
			return err
		}
		entries, err := os.ReadDir(filepath.Join(dst, dir))
		if err != nil {
			return err
		}
		for _, e := range entries {
			if rel := filepath.Join(dir, e.Name()); !want[rel] {
				errs = append(errs, os.Remove(filepath.Join(dst, rel)))
			}
		}
	}
	return errors.Join(errs...)
}
