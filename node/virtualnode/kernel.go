package virtualnode

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// EnactWrites does what the kernel does when a program writes the sysfs
// attributes that change the hardware, which in the generated tree are
// plain files:
//
//   - a PF's sriov_numvfs: SetNumVFs. A count the kernel refuses (not a
//     number, beyond sriov_totalvfs, or one non-zero count for another,
//     which the kernel answers with EBUSY) is logged, and the file is
//     written back as it was;
//   - a driver's unbind (bus/pci/drivers/X/unbind, which a function's
//     driver/unbind is): the function is unbound;
//   - a driver's bind: the function is bound to that driver;
//   - an mlx4 VF's pkey_idx/N in its PF's iov tree (iov.go): an index
//     the kernel refuses (not below the physical table's last entry, nor
//     "none") is logged and written back; index 0 mapped, the VF's own
//     P_Key table entry 0 follows;
//   - bus/pci/drivers_probe: an unbound function is bound to its
//     driver_override or, without one, a VF to its PF's VF driver. An
//     override the function cannot take (a netdev driver not its own, or
//     no driver the node has) leaves it unbound, as the driver's probe
//     failing or no driver matching does.
//
// driver_override itself the kernel only stores, as the file does. Where
// the kernel fails the write, the emulation cannot: the writer sees the
// tree unchanged, and the log says why.
//
// It runs until ctx is done, calling ready (if not nil) once it watches.
// Only one process may run it for a node: a test in the process that
// built the node, or the cluster's daemon (cmd/hwnet-vnode-kernel).
func (n *Node) EnactWrites(ctx context.Context, log *slog.Logger, ready func()) error {
	return n.EnactWritesInto(ctx, log, "", ready)
}

// EnactWritesInto is EnactWrites that also keeps dev, a /dev for
// containers, showing the node's devices (MirrorDevices) after the writes
// it enacts, as devtmpfs shows those a driver makes and removes: a VF
// bound to vfio-pci has its group's node there as the bind shows. An
// empty dev mirrors nothing.
func (n *Node) EnactWritesInto(ctx context.Context, log *slog.Logger, dev string, ready func()) error {
	w, err := n.newWriteWatch()
	if err != nil {
		return fmt.Errorf("enact writes: %w", err)
	}
	w.dev = dev
	stop := context.AfterFunc(ctx, func() { w.f.Close() })
	defer stop()
	if ready != nil {
		ready()
	}
	err = w.serve(ctx, log)
	if ctx.Err() != nil {
		return nil
	}
	w.f.Close()
	return fmt.Errorf("enact writes: %w", err)
}

// writeWatch is an inotify instance on the tree's directories whose
// files stand for kernel attributes.
type writeWatch struct {
	n    *Node
	f    *os.File
	root string
	// dirs maps each watch descriptor to its directory, relative to root.
	dirs map[int32]string
	// dev is where the node's devices are mirrored, "" nowhere.
	dev string
}

// Tree directories EnactWrites watches besides the PFs'.
const (
	busPCI     = "bus/pci"
	pciDrivers = "bus/pci/drivers"
)

func (n *Node) newWriteWatch() (*writeWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	w := &writeWatch{n: n, f: os.NewFile(uintptr(fd), "inotify"), root: n.SysRoot(), dirs: map[int32]string{}}
	dirs := []string{busPCI}
	for _, f := range n.Devices() {
		if f.SRIOV != nil {
			dirs = append(dirs, f.SysPath)
		}
	}
	dirs = append(dirs, n.pkeyIdxDirs()...)
	for _, d := range dirs {
		if err := w.add(d, unix.IN_CLOSE_WRITE); err != nil {
			w.f.Close()
			return nil, err
		}
	}
	if err := w.add(pciDrivers, unix.IN_CREATE|unix.IN_ONLYDIR); err != nil {
		w.f.Close()
		return nil, err
	}
	drivers, err := os.ReadDir(filepath.Join(w.root, pciDrivers))
	if err != nil {
		w.f.Close()
		return nil, err
	}
	for _, d := range drivers {
		if err := w.add(path.Join(pciDrivers, d.Name()), unix.IN_CLOSE_WRITE); err != nil {
			w.f.Close()
			return nil, err
		}
	}
	return w, nil
}

func (w *writeWatch) add(dir string, mask uint32) error {
	wd, err := unix.InotifyAddWatch(int(w.f.Fd()), filepath.Join(w.root, dir), mask)
	if err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	w.dirs[int32(wd)] = dir
	return nil
}

// serve reads inotify events until the file is closed.
func (w *writeWatch) serve(ctx context.Context, log *slog.Logger) error {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		got, err := w.f.Read(buf)
		if err != nil {
			return err
		}
		for ev, name := range inotifyEvents(buf[:got]) {
			if err := w.handle(ctx, w.dirs[ev.Wd], name, ev.Mask); err != nil {
				log.Warn("the kernel would have failed this write", "file", path.Join(w.dirs[ev.Wd], name), "err", err)
			}
		}
		if w.dev != "" {
			if err := w.n.MirrorDevices(w.dev); err != nil {
				log.Warn("device files not mirrored", "dev", w.dev, "err", err)
			}
		}
	}
}

// inotifyEvents are the events read into buf, each with its name.
func inotifyEvents(buf []byte) iter.Seq2[*unix.InotifyEvent, string] {
	return func(yield func(*unix.InotifyEvent, string) bool) {
		for off := 0; off+unix.SizeofInotifyEvent <= len(buf); {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
			off += unix.SizeofInotifyEvent + int(ev.Len)
			if !yield(ev, strings.TrimRight(string(name), "\x00")) {
				return
			}
		}
	}
}

// handle enacts one write (or follows a new driver directory).
func (w *writeWatch) handle(ctx context.Context, dir, name string, mask uint32) error {
	switch {
	case dir == "":
		return nil
	case dir == pciDrivers:
		if mask&unix.IN_ISDIR != 0 {
			return w.newDriver(ctx, path.Join(pciDrivers, name))
		}
		return nil
	case dir == busPCI && name == "drivers_probe":
		return w.value(dir, name, func(addr string) error { return w.n.probe(ctx, addr) })
	case path.Dir(dir) == pciDrivers && name == "unbind":
		return w.value(dir, name, func(addr string) error { return w.n.unbind(ctx, addr, path.Base(dir)) })
	case path.Dir(dir) == pciDrivers && name == "bind":
		return w.value(dir, name, func(addr string) error { return w.n.BindDriver(ctx, addr, path.Base(dir)) })
	case name == "sriov_numvfs":
		return w.value(dir, name, func(v string) error {
			return errors.Join(w.n.writtenNumVFs(ctx, dir, v), w.watchPKeyIdx())
		})
	case path.Base(dir) == "pkey_idx" && isDecimal(name):
		return w.value(dir, name, func(v string) error { return w.n.writtenPKeyIdx(dir, name, v) })
	}
	return nil
}

// watchPKeyIdx watches the pkey_idx directories of VFs made since the
// last call: watching one twice is the same watch.
func (w *writeWatch) watchPKeyIdx() error {
	var errs []error
	for _, d := range w.n.pkeyIdxDirs() {
		errs = append(errs, w.add(d, unix.IN_CLOSE_WRITE))
	}
	return errors.Join(errs...)
}

// isDecimal says whether s is a number, as the kernel's attribute names
// in a table directory are (not the tree's ".N.new" while it replaces
// one).
func isDecimal(s string) bool {
	_, err := strconv.Atoi(s)
	return err == nil && s[0] != '+' && s[0] != '-'
}

// newDriver watches a driver's new directory, and enacts what was
// written to it before the watch began.
func (w *writeWatch) newDriver(ctx context.Context, dir string) error {
	if err := w.add(dir, unix.IN_CLOSE_WRITE); err != nil {
		return err
	}
	return errors.Join(w.handle(ctx, dir, "unbind", 0), w.handle(ctx, dir, "bind", 0))
}

// value calls fn with the file's content, trimmed; an empty file is the
// tree's own write, not a program's.
func (w *writeWatch) value(dir, name string, fn func(string) error) error {
	data, err := os.ReadFile(filepath.Join(w.root, dir, name))
	if err != nil {
		return err
	}
	v := strings.TrimSpace(string(data))
	if v == "" {
		return nil
	}
	return fn(v)
}

// writtenNumVFs enacts a write of v to the sriov_numvfs of the PF whose
// directory is dir, or writes the count back when the kernel would refuse
// v. The tree's own write of the count it has is no change.
func (n *Node) writtenNumVFs(ctx context.Context, dir, v string) error {
	pf, ok := n.functionAt(dir)
	if !ok || pf.SRIOV == nil {
		return fmt.Errorf("no PF at %s", dir)
	}
	have := pf.SRIOV.NumVFs
	num, err := strconv.Atoi(v)
	switch {
	case err != nil:
		err = fmt.Errorf("%q is not a number (EINVAL)", v)
	case num == have:
		return nil
	case have > 0 && num > 0:
		err = fmt.Errorf("%d VFs to %d: write 0 first (EBUSY)", have, num)
	default:
		err = n.SetNumVFs(ctx, pf.Addr, num)
	}
	if err != nil {
		return errors.Join(err, n.rewriteNumVFs(pf.Addr))
	}
	return nil
}

// rewriteNumVFs writes the PF's count back over a refused write.
func (n *Node) rewriteNumVFs(addr string) error {
	n.lock()
	defer n.mu.Unlock()
	pf, err := n.function(addr)
	if err != nil {
		return err
	}
	return n.writeNumVFs(pf, pf.SRIOV.NumVFs)
}

// functionAt is the function whose directory is dir.
func (n *Node) functionAt(dir string) (Function, bool) {
	for _, f := range n.Devices() {
		if f.SysPath == dir {
			return f, true
		}
	}
	return Function{}, false
}

// unbind enacts a write of addr to driver's unbind: the kernel unbinds
// the function when that driver has it.
func (n *Node) unbind(ctx context.Context, addr, driver string) error {
	f, ok := n.Device(addr)
	switch {
	case !ok:
		return fmt.Errorf("no PCI function %s (ENODEV)", addr)
	case f.Driver != driver:
		return fmt.Errorf("%s is not bound to %s (ENODEV)", addr, driver)
	}
	return n.BindDriver(ctx, addr, "")
}

// probe enacts a write of addr to drivers_probe: an unbound function
// binds to its driver_override, or a VF without one to its PF's VF
// driver, as matching its device ID would.
func (n *Node) probe(ctx context.Context, addr string) error {
	f, ok := n.Device(addr)
	if !ok {
		return fmt.Errorf("no PCI function %s (ENODEV)", addr)
	}
	if f.Driver != "" {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(n.SysRoot(), f.SysPath, "driver_override"))
	if err != nil {
		return err
	}
	driver := strings.TrimSpace(string(data))
	if driver == "(null)" {
		driver = ""
	}
	own := n.ownDriver(f)
	switch {
	case driver == "":
		driver = own
	case driver != own && driver != driverVFIO && !isUIODriver(driver):
		return fmt.Errorf("%s stays unbound: driver_override %q is no driver it can take", addr, driver)
	}
	if driver == "" {
		return fmt.Errorf("no driver for %s", addr)
	}
	return n.BindDriver(ctx, addr, driver)
}

// ownDriver is the driver matching the function's device ID: a VF's
// PF's VF driver, "" for a function whose driver the node does not know.
func (n *Node) ownDriver(f Function) string {
	if f.IsVF() {
		if pf, ok := n.Device(f.PF); ok && pf.SRIOV != nil {
			return pf.SRIOV.VFDriver
		}
	}
	return ""
}
