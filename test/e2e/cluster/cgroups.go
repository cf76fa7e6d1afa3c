package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// cgroupParent holds every cluster's cgroupRoot.
const cgroupParent = "/hwnet-e2e"

// daemonCgroup is the cgroup below cgroupRoot that the cluster's own
// processes join; kubelet puts pods under cgroupRoot/kubepods.
const daemonCgroup = "system"

// cgroupRoot is kubelet's cgroupRoot for the cluster of this name.
func cgroupRoot(name string) string { return path.Join(cgroupParent, name) }

// cgroupHierarchies returns the mount points of the cgroup hierarchies, v1
// and v2: on a hybrid host like this one, runc also puts containers into
// the unified v2 hierarchy.
func cgroupHierarchies() ([]string, error) {
	f, err := os.Open(threadMountinfo)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		sep := slices.Index(fields, "-")
		if sep > 4 && sep+1 < len(fields) && (fields[sep+1] == "cgroup" || fields[sep+1] == "cgroup2") {
			points = append(points, fields[4])
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}
	if len(points) == 0 {
		return nil, errors.New("no cgroup hierarchy is mounted")
	}
	return points, nil
}

// createCgroups makes root and root/daemonCgroup in every hierarchy. In v1
// cpuset's, each new level gets its parent's CPUs and memory nodes, without
// which no process may join it.
func createCgroups(root string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		for _, dir := range cgroupLevels(path.Join(root, daemonCgroup)) {
			if err := createCgroup(filepath.Join(h, dir)); err != nil {
				return err
			}
		}
	}
	return nil
}

// cgroupLevels returns "/a", "/a/b", "/a/b/c" for "/a/b/c".
func cgroupLevels(dir string) []string {
	var levels []string
	for d := path.Clean(dir); d != "/"; d = path.Dir(d) {
		levels = append([]string{d}, levels...)
	}
	return levels
}

func createCgroup(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	for _, file := range []string{"cpuset.cpus", "cpuset.mems"} {
		own := filepath.Join(dir, file)
		if !fileExists(own) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(filepath.Dir(dir), file))
		if err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		if current, _ := os.ReadFile(own); strings.TrimSpace(string(current)) != "" {
			continue
		}
		if err := os.WriteFile(own, data, 0o644); err != nil {
			return fmt.Errorf("cgroup %s: copy %s from its parent: %w", dir, file, err)
		}
	}
	return nil
}

// joinCgroups moves pid into root/daemonCgroup in every hierarchy.
func joinCgroups(root string, pid int) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		procs := filepath.Join(h, root, daemonCgroup, "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move pid %d to %s: %w", pid, procs, err)
		}
	}
	return nil
}

// cgroupPIDs lists the processes in root and below, in any hierarchy.
func cgroupPIDs(root string) ([]int, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, h := range hierarchies {
		err := walkCgroups(filepath.Join(h, root), func(dir string) error {
			more, err := readPIDs(filepath.Join(dir, "cgroup.procs"))
			pids = append(pids, more...)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	slices.Sort(pids)
	return slices.Compact(pids), nil
}

func readPIDs(file string) ([]int, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, field := range strings.Fields(string(data)) {
		pid, err := strconv.Atoi(field)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// walkCgroups calls fn for dir and every cgroup below it, children before
// parents, so fn may remove them. A missing dir has none.
func walkCgroups(dir string, fn func(dir string) error) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := walkCgroups(filepath.Join(dir, e.Name()), fn); err != nil {
				return err
			}
		}
	}
	return fn(dir)
}

// removeCgroups removes root and everything below it in every hierarchy,
// and cgroupParent once no other cluster uses it.
func removeCgroups(root string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for _, h := range hierarchies {
		errs = append(errs, walkCgroups(filepath.Join(h, root), os.Remove))
		parent := filepath.Join(h, cgroupParent)
		if err := os.Remove(parent); err != nil && !errors.Is(err, fs.ErrNotExist) && !isBusy(err) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// isBusy reports an rmdir of a cgroup that still has children or tasks.
func isBusy(err error) bool {
	return errors.Is(err, unix.EBUSY) || errors.Is(err, unix.ENOTEMPTY)
}
