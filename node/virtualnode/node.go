package virtualnode

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/hwdb"
)

// NetnsPrefix starts the name of every virtual node's network namespace.
const NetnsPrefix = "hwnet-vn-"

// stateFile holds a node's state in its directory.
const stateFile = "state.json"

// DefaultDir is the state directory of the node with this name when
// Options.Dir is empty.
func DefaultDir(name string) string {
	return filepath.Join("/run/hwnet/virtual-node", name)
}

// Options says where and how Build makes a node.
type Options struct {
	// Dir is the state directory: the tree goes to Dir/sys and Dir/dev, the
	// state to Dir/state.json. It must not exist or be empty; "" means
	// DefaultDir(spec.Name).
	Dir string
	// Links makes every netdev a real veth link in the network namespace
	// NetnsPrefix+spec.Name. It needs root.
	Links bool
}

// Node is a built virtual node. Its methods are safe for concurrent use
// within one process. Each starts from the state last saved, by this or
// another process (the kernel emulation, EnactWrites, runs in a daemon
// beside the tests); two processes must not change one node at once.
type Node struct {
	mu sync.Mutex
	st *state
	// saved identifies the state file st was last read from or saved to.
	saved stateStamp
	// pending are the uevents of a change under way, announced once the
	// tree shows it; seq numbers them.
	pending []kernelUEvent
	seq     uint64
}

// Build lays the spec out on PCI buses, creates the netns and veth links
// if opts.Links, writes the tree and saves the state. On failure it leaves
// nothing behind.
//
// As root, Build mounts a tmpfs on the state directory unless it already
// is on one: a tree has about fifty files and links a VF, and disk file
// systems make big trees slow to write and to remove. Destroy unmounts it.
func Build(ctx context.Context, spec *Spec, db *hwdb.DB, opts Options) (*Node, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	st, err := plan(spec, db)
	if err != nil {
		return nil, err
	}
	n, err := create(ctx, st, opts)
	if err != nil {
		return nil, fmt.Errorf("build virtual node %s: %w", spec.Name, err)
	}
	return n, nil
}

// create makes the node's state directory and everything the node has,
// and undoes it all when a step fails.
func create(ctx context.Context, st *state, opts Options) (*Node, error) {
	dir, err := filepath.Abs(cmp.Or(opts.Dir, DefaultDir(st.Name)))
	if err != nil {
		return nil, err
	}
	if err := makeEmptyDir(dir); err != nil {
		return nil, err
	}
	st.Dir = dir
	n := &Node{st: st}
	if err := n.populate(ctx, opts.Links); err != nil {
		return nil, errors.Join(err, n.Destroy())
	}
	return n, nil
}

func (n *Node) populate(ctx context.Context, withLinks bool) error {
	if os.Geteuid() == 0 && !onTmpfs(n.st.Dir) {
		if err := unix.Mount("tmpfs", n.st.Dir, "tmpfs", 0, "mode=0755"); err != nil {
			return fmt.Errorf("mount tmpfs on %s: %w", n.st.Dir, err)
		}
		n.st.Tmpfs = true
	}
	if withLinks {
		if err := n.buildLinks(ctx); err != nil {
			return err
		}
	}
	if err := n.writeTree(); err != nil {
		return err
	}
	return n.save()
}

// writeTree writes the whole tree: root ports, PFs and NICs first, then
// the VFs, which link to their PFs.
func (n *Node) writeTree() error {
	l := n.layout()
	l.writeSkeleton()
	var vfs []*Function
	for _, f := range n.st.Functions {
		if f.IsVF() {
			vfs = append(vfs, f)
		} else {
			l.writeFunction(f)
		}
	}
	if err := l.Err(); err != nil {
		return err
	}
	return n.writeFunctions(vfs)
}

// writeFunctions writes functions whose parents are already in the tree,
// spread over one goroutine a CPU: a tree of thousands of VFs takes
// hundreds of thousands of system calls.
func (n *Node) writeFunctions(fs []*Function) error {
	workers := min(runtime.GOMAXPROCS(0), (len(fs)+minFunctionsPerWorker-1)/minFunctionsPerWorker)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		part := fs[w*len(fs)/workers : (w+1)*len(fs)/workers]
		wg.Go(func() {
			l := n.layout()
			for _, f := range part {
				l.writeFunction(f)
			}
			errs[w] = l.Err()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// minFunctionsPerWorker keeps small trees on one goroutine.
const minFunctionsPerWorker = 64

func (n *Node) buildLinks(ctx context.Context) error {
	name := NetnsPrefix + n.st.Name
	if err := createNetns(name); err != nil {
		return err
	}
	n.st.Netns = name
	return n.changeLinks(func(ls *links) error {
		if err := ls.setUpLoopback(); err != nil {
			return err
		}
		return ls.add(ctx, n.st, n.st.Functions)
	})
}

// onTmpfs reports whether dir is on a tmpfs.
func onTmpfs(dir string) bool {
	var fs unix.Statfs_t
	return unix.Statfs(dir, &fs) == nil && fs.Type == unix.TMPFS_MAGIC
}

// makeEmptyDir makes dir and its parents, and accepts an existing empty dir.
func makeEmptyDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	err := os.Mkdir(dir, 0o755)
	if !errors.Is(err, fs.ErrExist) {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if _, err := d.Readdirnames(1); err != io.EOF {
		return fmt.Errorf("state directory %s: %w and is not empty", dir, fs.ErrExist)
	}
	return nil
}

// Open returns the node whose state directory is dir, as built by Build in
// this or another process.
func Open(dir string) (*Node, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("open virtual node: %w", err)
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("open virtual node %s: %w", dir, err)
	}
	n := &Node{st: st}
	n.saved = stampOf(filepath.Join(dir, stateFile))
	return n, nil
}

// stateStamp tells one saved state file from another: each save renames
// a new file into place.
type stateStamp struct {
	ino   uint64
	mtime int64
}

func stampOf(path string) stateStamp {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return stateStamp{}
	}
	return stateStamp{ino: st.Ino, mtime: st.Mtim.Nano()}
}

// lock takes the node's mutex and reads the state again when another
// process saved it since: the tree is the truth they share.
func (n *Node) lock() {
	n.mu.Lock()
	if n.st.Dir == "" {
		return
	}
	path := filepath.Join(n.st.Dir, stateFile)
	now := stampOf(path)
	if now == n.saved || now == (stateStamp{}) {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	st := &state{}
	if json.Unmarshal(data, st) == nil {
		n.st, n.saved = st, now
	}
}

// save writes the state atomically, so that Open never sees half of it.
func (n *Node) save() error {
	data, err := json.MarshalIndent(n.st, "", "\t")
	if err != nil {
		return err
	}
	path := filepath.Join(n.st.Dir, stateFile)
	if err := os.WriteFile(path+".tmp", data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return err
	}
	n.saved = stampOf(path)
	return nil
}

// Name returns the spec's name.
func (n *Node) Name() string { return n.st.Name }

// Dir returns the state directory.
func (n *Node) Dir() string { return n.st.Dir }

// SysRoot returns the generated sysfs tree, which Run mounts over /sys.
func (n *Node) SysRoot() string { return filepath.Join(n.st.Dir, "sys") }

// DevRoot returns the generated device directory with vfio/<group>,
// infiniband/uverbsN, umadN, issmN and rdma_cm, and uioN, which Run lays
// over /dev.
func (n *Node) DevRoot() string { return filepath.Join(n.st.Dir, "dev") }

// NetnsName returns the node's network namespace, or "" when it was built
// without links.
func (n *Node) NetnsName() string { return n.st.Netns }

// Devices returns copies of the node's network functions (PFs, VFs and
// standalone NICs, not the root ports above them) in address order.
func (n *Node) Devices() []Function {
	n.lock()
	defer n.mu.Unlock()
	var fs []Function
	for _, f := range n.st.Functions {
		if f.IsNetwork() {
			fs = append(fs, f.clone())
		}
	}
	slices.SortFunc(fs, func(a, b Function) int { return cmp.Compare(a.Addr, b.Addr) })
	return fs
}

// Device returns a copy of the function at the PCI address, root ports
// included.
func (n *Node) Device(addr string) (Function, bool) {
	n.lock()
	defer n.mu.Unlock()
	f, err := n.function(addr)
	if err != nil {
		return Function{}, false
	}
	return f.clone(), true
}

// function finds a function by address.
func (n *Node) function(addr string) (*Function, error) {
	for _, f := range n.st.Functions {
		if f.Addr == addr {
			return f, nil
		}
	}
	return nil, fmt.Errorf("no PCI function %s: %w", addr, fs.ErrNotExist)
}

// changeLinks runs fn on the node's links; a node without links has none
// to change.
func (n *Node) changeLinks(fn func(*links) error) error {
	if n.st.Netns == "" {
		return nil
	}
	ls, err := openLinks(n.st.Netns)
	if err != nil {
		return err
	}
	defer ls.Close()
	return fn(ls)
}

// Destroy deletes the node's netns, which destroys its links, unmounts
// the tmpfs Build mounted and removes the state directory. It is
// idempotent.
func (n *Node) Destroy() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var errs []error
	if n.st.Netns != "" {
		errs = append(errs, deleteNetns(n.st.Netns))
	}
	if n.st.Tmpfs {
		err := unix.Unmount(n.st.Dir, unix.MNT_DETACH)
		if err != nil && err != unix.EINVAL && err != unix.ENOENT {
			errs = append(errs, fmt.Errorf("unmount %s: %w", n.st.Dir, err))
		}
	}
	if err := os.RemoveAll(n.st.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("destroy virtual node %s: %w", n.st.Name, err)
	}
	return nil
}
