package virtualnode

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// tree writes files, directories and relative symlinks below a node's sys
// and dev roots. Like bufio.Writer it keeps the first error and ignores
// later calls, so that layout code reads as a list of entries.
type tree struct {
	sys, dev string
	err      error
}

func newTree(dir string) *tree {
	return &tree{sys: filepath.Join(dir, "sys"), dev: filepath.Join(dir, "dev")}
}

// dir makes the directory rel below sys; its parent must exist.
func (t *tree) dir(rel string) {
	t.mkdir(t.sys + "/" + rel)
}

// devDir makes the directory rel below dev; its parent must exist.
func (t *tree) devDir(rel string) {
	t.mkdir(t.dev + "/" + rel)
}

func (t *tree) mkdir(path string) {
	if t.err != nil {
		return
	}
	if err := unix.Mkdir(path, 0o755); err != nil && err != unix.EEXIST {
		t.err = &os.PathError{Op: "mkdir", Path: path, Err: err}
	}
}

// file writes the attribute rel below sys. It uses raw system calls: a big
// tree has hundreds of thousands of files, and os.WriteFile's poller
// registration would add a system call to each.
func (t *tree) file(rel, content string) {
	t.write(t.sys+"/"+rel, content)
}

// replace writes the file rel below sys as a new file renamed over it: a
// reader sees the old content or the new, never the empty file a
// truncating write leaves for a moment (a kernel attribute reads whole).
// Its temporary name is no attribute the kernel emulation enacts.
func (t *tree) replace(rel, content string) {
	path := t.sys + "/" + rel
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".new")
	t.write(tmp, content)
	if t.err != nil {
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		t.err = err
	}
}

// devFile makes the device node stand-in rel below dev: an empty file.
func (t *tree) devFile(rel string) {
	t.write(t.dev+"/"+rel, "")
}

func (t *tree) write(path, content string) {
	if t.err != nil {
		return
	}
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.err = &os.PathError{Op: "open", Path: path, Err: err}
		return
	}
	if content != "" {
		_, err = unix.Write(fd, []byte(content))
	}
	if cerr := unix.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		t.err = &os.PathError{Op: "write", Path: path, Err: err}
	}
}

// link makes rel a symlink to target, both relative to sys, with the
// relative target the kernel writes: up to the nearest common ancestor of
// the link and the target's parent, then down, so that the target's own
// name always ends it. A netdev's device link is "../../../0000:3b:00.0",
// not "../..", and tools take the PCI address from its last element.
func (t *tree) link(rel, target string) {
	if t.err != nil {
		return
	}
	up, err := filepath.Rel(parentDir(rel), parentDir(target))
	if err != nil {
		t.err = fmt.Errorf("link %s to %s: %w", rel, target, err)
		return
	}
	dest := filepath.Join(up, filepath.Base(target))
	path := t.sys + "/" + rel
	if err := unix.Symlink(dest, path); err != nil {
		t.err = &os.PathError{Op: "symlink", Path: path, Err: err}
	}
}

// remove deletes rel below sys and everything under it; a missing entry is
// no error.
func (t *tree) remove(rel string) {
	t.removePath(t.sys + "/" + rel)
}

// devRemove deletes rel below dev.
func (t *tree) devRemove(rel string) {
	t.removePath(t.dev + "/" + rel)
}

func (t *tree) removePath(path string) {
	if t.err != nil {
		return
	}
	// Most entries are files and links: try the one system call first.
	err := unix.Unlink(path)
	if err == nil || err == unix.ENOENT {
		return
	}
	if err := os.RemoveAll(path); err != nil {
		t.err = err
	}
}

// exists reports whether rel below sys exists, without following a final
// symlink.
func (t *tree) exists(rel string) bool {
	_, err := os.Lstat(t.sys + "/" + rel)
	return err == nil
}

// Err returns the first error of any call.
func (t *tree) Err() error {
	if t.err != nil {
		return fmt.Errorf("virtual node tree: %w", t.err)
	}
	return nil
}
