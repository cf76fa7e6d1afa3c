// Package capture takes a node's NIC layout (api/capture) from its sysfs
// and /dev, scrubbed of the identifiers that would name the machine, and
// unpacks one into a tree that discovery reads as it reads the node's.
package capture

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/api/capture"
)

// Options say where the node's trees are.
type Options struct {
	SysfsRoot string // "/sys"
	DevRoot   string // "/dev"
	// Kernel is the node's kernel release, kept in the capture.
	Kernel string
	// Now is the capture's time; time.Now when nil.
	Now func() time.Time
}

// Take captures what discovery reads of the node's network functions:
// each one's sysfs directory (a VF's and a port's included), the class,
// driver and IOMMU group entries that point at them, the NUMA nodes,
// huge pages and the module parameters hwnetctl doctor reads, and the
// device nodes they give. MACs, GUIDs and serial numbers are replaced.
func Take(o Options) (*capture.Capture, error) {
	root, err := filepath.EvalSymlinks(o.SysfsRoot)
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	t := &taker{sys: o.SysfsRoot, root: root, dev: o.DevRoot, seen: map[string]bool{}, scrub: newScrubber(), functions: map[string]bool{}}
	funcs, err := t.networkFunctions()
	if err != nil {
		return nil, err
	}
	for _, addr := range funcs {
		if err := t.function(addr); err != nil {
			return nil, fmt.Errorf("capture %s: %w", addr, err)
		}
	}
	if err := t.classLinks(); err != nil {
		return nil, err
	}
	for _, dir := range []string{"devices/system/node", "kernel/mm/hugepages", "module/vfio", "module/vfio_iommu_type1", "module/ib_core"} {
		if err := t.walk(dir, 3); err != nil {
			return nil, err
		}
	}
	if err := t.devices(); err != nil {
		return nil, err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	c := &capture.Capture{Kernel: o.Kernel, Taken: now().UTC(), Entries: t.entries}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	return c, nil
}

type taker struct {
	sys, dev string
	// root is sys with its symlinks resolved.
	root    string
	entries []capture.Entry
	seen    map[string]bool
	scrub   *scrubber
	// functions are the captured functions' directories.
	functions map[string]bool
}

// networkFunctions are the PCI functions of a network class (Ethernet,
// InfiniBand; 0x0c06 for InfiniBand HCAs of the serial bus class) or with
// a netdev or RDMA device, by address.
func (t *taker) networkFunctions() ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(t.sys, "bus/pci/devices"))
	if err != nil {
		return nil, fmt.Errorf("capture: %w", err)
	}
	var out []string
	for _, e := range entries {
		dir := filepath.Join(t.sys, "bus/pci/devices", e.Name())
		class, _ := os.ReadFile(filepath.Join(dir, "class"))
		c, _ := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(string(class)), "0x"), 16, 32)
		if c>>16 == 0x02 || c>>8 == 0x0c06 || exists(filepath.Join(dir, "net")) || exists(filepath.Join(dir, "infiniband")) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// function captures one function: the bus's link to it, its directory
// and its parents, and what points at it.
func (t *taker) function(addr string) error {
	link := "bus/pci/devices/" + addr
	real, err := t.resolve(link)
	if err != nil {
		return err
	}
	t.functions[real] = true
	if err := t.walk(real, 6); err != nil { // with its parents
		return err
	}
	if err := t.scalableFunctions(real); err != nil {
		return err
	}
	t.parents(link)
	if err := t.add(link); err != nil {
		return err
	}
	for _, rel := range []string{"driver", "iommu_group"} {
		if target, err := t.resolve(path.Join(real, rel)); err == nil {
			if err := t.walk(target, 2); err != nil {
				return err
			}
		}
	}
	return nil
}

// scalableFunctions captures, as deep as a function, the directories of
// the PF's scalable functions (auxiliary devices below it with an sfnum):
// their RDMA ports' GIDs lie deeper than the PF's walk reaches.
func (t *taker) scalableFunctions(pf string) error {
	entries, err := os.ReadDir(filepath.Join(t.sys, pf))
	if err != nil {
		return nil
	}
	for _, e := range entries {
		if e.IsDir() && exists(filepath.Join(t.sys, pf, e.Name(), "sfnum")) {
			if err := t.walk(path.Join(pf, e.Name()), 6); err != nil {
				return err
			}
		}
	}
	return nil
}

// classLinks captures the class entries (class/net/<name> and the like)
// and the auxiliary bus's (a PF's scalable functions) that point into a
// captured function's directory, each resolved once.
func (t *taker) classLinks() error {
	for _, dir := range []string{"class/net", "class/infiniband", "class/infiniband_verbs", "class/infiniband_mad", "class/uio", "bus/auxiliary/devices"} {
		entries, err := os.ReadDir(filepath.Join(t.sys, dir))
		if err != nil {
			continue
		}
		for _, e := range entries {
			rel := path.Join(dir, e.Name())
			target, err := t.resolve(rel)
			if err != nil || !t.inFunction(target) {
				continue
			}
			t.parents(rel)
			if err := t.add(rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// inFunction reports whether rel is inside a captured function's directory.
func (t *taker) inFunction(rel string) bool {
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if t.functions[d] {
			return true
		}
	}
	return false
}

// resolve is the path, relative to the sysfs root, that rel's symlinks
// lead to.
func (t *taker) resolve(rel string) (string, error) {
	abs, err := filepath.EvalSymlinks(filepath.Join(t.sys, rel))
	if err != nil {
		return "", err
	}
	out, err := filepath.Rel(t.root, abs)
	if err != nil || out == ".." || strings.HasPrefix(out, "../") {
		return "", fmt.Errorf("%s leads out of %s", rel, t.sys)
	}
	return filepath.ToSlash(out), nil
}

// parents adds rel's parent directories.
func (t *taker) parents(rel string) {
	var dirs []string
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		dirs = append(dirs, d)
	}
	slices.Reverse(dirs)
	for _, d := range dirs {
		t.put(capture.Entry{Path: "sys/" + d, Kind: capture.Dir})
	}
}

// skipped are entries that say nothing of the layout, change all the
// time, or are large or binary.
func skipped(name string) bool {
	switch name {
	case "power", "msi_irqs", "statistics", "queues", "counters", "hw_counters", "gid_attrs", "config", "rom", "vpd",
		"remove", "rescan", "reset", "reset_method", "uevent", "serial_number", "dsn", "new_id", "remove_id", "bind", "unbind",
		"meminfo", "vmstat", "numastat":
		return true
	}
	return strings.HasPrefix(name, "resource")
}

// walk adds rel and, depth levels down, what is in it: directories,
// readable small files and symlinks, which it does not follow.
func (t *taker) walk(rel string, depth int) error {
	info, err := os.Lstat(filepath.Join(t.sys, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	t.parents(rel)
	if err := t.add(rel); err != nil || !info.IsDir() || depth == 0 {
		return err
	}
	entries, err := os.ReadDir(filepath.Join(t.sys, rel))
	if err != nil {
		return nil // a directory the node keeps to itself
	}
	for _, e := range entries {
		if !skipped(e.Name()) {
			if err := t.walk(path.Join(rel, e.Name()), depth-1); err != nil {
				return err
			}
		}
	}
	return nil
}

// add captures the one entry at rel, a file's content scrubbed.
func (t *taker) add(rel string) error {
	abs := filepath.Join(t.sys, rel)
	info, err := os.Lstat(abs)
	if err != nil {
		return err
	}
	e := capture.Entry{Path: "sys/" + rel}
	switch {
	case info.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return err
		}
		if path.IsAbs(target) {
			return nil // not a sysfs link
		}
		e.Kind, e.Target = capture.Link, target
	case info.IsDir():
		e.Kind = capture.Dir
	case info.Mode().IsRegular():
		data, err := os.ReadFile(abs)
		if err != nil || len(data) > capture.MaxFileData {
			return nil // write-only or not an attribute
		}
		e.Kind, e.Data = capture.File, t.scrub.value(path.Base(rel), string(data))
	default:
		return nil
	}
	t.put(e)
	return nil
}

func (t *taker) put(e capture.Entry) {
	if !t.seen[e.Path] {
		t.seen[e.Path] = true
		t.entries = append(t.entries, e)
	}
}

// devices captures the device nodes discovery looks for.
func (t *taker) devices() error {
	for _, dir := range []string{"vfio", "infiniband"} {
		entries, err := os.ReadDir(filepath.Join(t.dev, dir))
		if err != nil {
			continue
		}
		t.put(capture.Entry{Path: "dev/" + dir, Kind: capture.Dir})
		for _, e := range entries {
			t.put(capture.Entry{Path: "dev/" + dir + "/" + e.Name(), Kind: capture.Device})
		}
	}
	entries, err := os.ReadDir(t.dev)
	if err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "uio") || strings.HasPrefix(e.Name(), "vhost-vdpa-") {
			t.put(capture.Entry{Path: "dev/" + e.Name(), Kind: capture.Device})
		}
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
