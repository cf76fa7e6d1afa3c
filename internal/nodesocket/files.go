package nodesocket

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Dir creates dir if needed and makes it the socket's own, whoever created
// it: owned by the agent's user (and the named group), mode 0700 (0750
// with a group). A directory other programs share (the root, a top-level
// directory, a sticky one like /tmp) is refused instead of tightened.
func (a Access) Dir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if shared(abs) {
		return fmt.Errorf("socket directory %s is shared with the rest of the node: give the socket a directory of its own, like /run/hwnet", abs)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return fmt.Errorf("socket directory: %w", err)
	}
	// Through one descriptor opened without following a symlink, so the
	// owner and mode land on the directory that was checked.
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", abs, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("socket directory %s: %w", abs, err)
	}
	if st.Mode&unix.S_ISVTX != 0 {
		return fmt.Errorf("socket directory %s is sticky, shared with the rest of the node: give the socket a directory of its own", abs)
	}
	uid, gid := a.owner()
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return fmt.Errorf("socket directory %s: chown %d:%d: %w", abs, uid, gid, err)
	}
	if err := unix.Fchmod(fd, a.dirMode()); err != nil {
		return fmt.Errorf("socket directory %s: chmod %o: %w", abs, a.dirMode(), err)
	}
	return nil
}

// Socket gives a socket file just created its owner and mode: 0600, or
// 0660 for the named group.
func (a Access) Socket(path string) error {
	uid, gid := a.owner()
	if err := os.Lchown(path, uid, gid); err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	if err := os.Chmod(path, a.socketMode()); err != nil {
		return fmt.Errorf("socket %s: %w", path, err)
	}
	return nil
}

// shared says whether dir is one other programs use (the root, a top-level
// directory, /var's common ones), which Dir would lock them out of.
func shared(dir string) bool {
	switch dir {
	case "/var/run", "/var/tmp", "/var/lib":
		return true
	}
	return strings.Count(dir, "/") < 2
}
