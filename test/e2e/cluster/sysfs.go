package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// realSysEntries are the parts of /sys that come from the machine's sysfs
// even where the virtual node's tree has them: the cgroup file systems
// (kubelet, runc), CPU and NUMA topology (cadvisor, kubelet's managers),
// huge pages (cadvisor fails without them) and block devices (cadvisor's
// disk map; /sys/block links into devices/virtual/block).
func realSysEntries() []string {
	return []string{"fs", "devices/system", "devices/virtual/block", "kernel/mm"}
}

// sysEntry is one entry of the composed /sys.
type sysEntry struct {
	// Rel is the entry's path under /sys, e.g. "devices/pci0000:3a".
	Rel string
	// FromReal says the entry comes from the machine's sysfs rather than
	// the virtual node's tree.
	FromReal bool
	// Type is fs.ModeDir, fs.ModeSymlink or 0 for a regular file.
	Type fs.FileMode
	// Composite entries are directories of the tmpfs whose own entries
	// follow in the plan; the others are bind mounts or copied links.
	Composite bool
}

// planSys lays out /sys from the virtual node's tree and the real sysfs:
// at each level the virtual entry wins, except realSysEntries; a directory
// both have is composed entry by entry only when a real entry lies below
// it. Parents come before their entries.
func planSys(virtual, real fs.FS) ([]sysEntry, error) {
	return planSysDir(virtual, real, ".")
}

func planSysDir(virtual, real fs.FS, dir string) ([]sysEntry, error) {
	virtualEntries, err := readDirIfExists(virtual, dir)
	if err != nil {
		return nil, err
	}
	realEntries, err := readDirIfExists(real, dir)
	if err != nil {
		return nil, err
	}
	var plan []sysEntry
	for _, name := range unionNames(virtualEntries, realEntries) {
		v, r := virtualEntries[name], realEntries[name]
		rel := path.Join(dir, name)
		switch {
		case slices.Contains(realSysEntries(), rel):
			if r != nil {
				plan = append(plan, sysEntry{Rel: rel, FromReal: true, Type: r.Type()})
			}
		case v != nil && r != nil && v.IsDir() && r.IsDir() && hasRealSysEntryBelow(rel):
			plan = append(plan, sysEntry{Rel: rel, Type: fs.ModeDir, Composite: true})
			below, err := planSysDir(virtual, real, rel)
			if err != nil {
				return nil, err
			}
			plan = append(plan, below...)
		case v != nil:
			plan = append(plan, sysEntry{Rel: rel, Type: v.Type()})
		default:
			plan = append(plan, sysEntry{Rel: rel, FromReal: true, Type: r.Type()})
		}
	}
	return plan, nil
}

func hasRealSysEntryBelow(rel string) bool {
	return slices.ContainsFunc(realSysEntries(), func(e string) bool { return strings.HasPrefix(e, rel+"/") })
}

// readDirIfExists reads dir's entries by name; a missing dir has none.
func readDirIfExists(fsys fs.FS, dir string) (map[string]fs.DirEntry, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	byName := make(map[string]fs.DirEntry, len(entries))
	for _, e := range entries {
		byName[e.Name()] = e
	}
	return byName, nil
}

func unionNames(a, b map[string]fs.DirEntry) []string {
	names := make([]string, 0, len(a)+len(b))
	for name := range a {
		names = append(names, name)
	}
	for name := range b {
		names = append(names, name)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// composeSys builds the planned /sys on a tmpfs at staging, then moves it
// over /sys. It runs in the cluster's mount namespace, where staging is a
// plain directory.
func composeSys(staging, virtualRoot string) error {
	plan, err := planSys(os.DirFS(virtualRoot), os.DirFS("/sys"))
	if err != nil {
		return fmt.Errorf("plan /sys: %w", err)
	}
	if err := unix.Mount("tmpfs", staging, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", staging, err)
	}
	for _, e := range plan {
		source := filepath.Join(virtualRoot, e.Rel)
		if e.FromReal {
			source = filepath.Join("/sys", e.Rel)
		}
		if err := placeSysEntry(e, source, filepath.Join(staging, e.Rel)); err != nil {
			return fmt.Errorf("compose /sys/%s: %w", e.Rel, err)
		}
	}
	if err := unix.Mount(staging, "/sys", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move %s to /sys: %w", staging, err)
	}
	return nil
}

// placeSysEntry makes e at target: a directory for composites, a copy of a
// link, or a bind mount of source.
func placeSysEntry(e sysEntry, source, target string) error {
	switch {
	case e.Composite:
		return os.Mkdir(target, 0o755)
	case e.Type&fs.ModeSymlink != 0:
		dest, err := os.Readlink(source)
		if err != nil {
			return err
		}
		return os.Symlink(dest, target)
	case e.Type.IsDir():
		if err := os.Mkdir(target, 0o755); err != nil {
			return err
		}
	default:
		if err := os.WriteFile(target, nil, 0o644); err != nil {
			return err
		}
	}
	return bindMount(source, target)
}
