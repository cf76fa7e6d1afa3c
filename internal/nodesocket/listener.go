package nodesocket

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// maxLogged bounds the pids remembered as logged: a flood of refused
// processes gets logged again rather than growing the set without bound.
const maxLogged = 1024

// listener admits the connections its Access allows and closes the others
// before a byte of theirs is read.
type listener struct {
	*net.UnixListener
	access Access
	socket string
	self   uint32
	log    *slog.Logger

	mu     sync.Mutex
	logged map[int32]bool
}

// Listener wraps ln so that Accept returns only the connections of peers
// a admits. Each other connection is closed at once, counted (a.Refused)
// and logged to log, once per pid, naming socket.
func (a Access) Listener(ln *net.UnixListener, socket string, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &listener{UnixListener: ln, access: a, socket: socket, self: uint32(os.Geteuid()), log: log, logged: map[int32]bool{}}
}

// Accept returns the next admitted connection; refused ones never leave
// it, and are counted and logged before they are closed, so the peer
// seeing the close has been accounted for.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		cred, err := peer(c)
		if err == nil && l.admits(cred) {
			return c, nil
		}
		l.refused(cred, err)
		c.Close()
	}
}

// peer reads the credentials the kernel recorded when the peer connected.
func peer(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return nil, fmt.Errorf("peer credentials: %w", credErr)
	}
	return cred, nil
}

// admits says whether the peer may use the socket: root, the agent's own
// user, or a member of the named group by its primary or a supplementary
// group. Supplementary groups are read from /proc (hwnet-agent has the
// host's pid namespace); they are the process's now, not at connect, and
// a non-root process can only drop groups, never gain one.
func (l *listener) admits(cred *unix.Ucred) bool {
	switch {
	case cred.Uid == 0 || cred.Uid == l.self:
		return true
	case !l.access.grouped:
		return false
	case cred.Gid == l.access.gid:
		return true
	}
	groups, err := supplementaryGroups(cred.Pid)
	return err == nil && slices.Contains(groups, l.access.gid)
}

// supplementaryGroups reads the Groups line of /proc/<pid>/status.
func supplementaryGroups(pid int32) ([]uint32, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, fmt.Errorf("supplementary groups: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("Groups:"))
		if !ok {
			continue
		}
		var groups []uint32
		for _, f := range bytes.Fields(rest) {
			g, err := strconv.ParseUint(string(f), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("supplementary groups of pid %d: %w", pid, err)
			}
			groups = append(groups, uint32(g))
		}
		return groups, nil
	}
	return nil, fmt.Errorf("supplementary groups of pid %d: no Groups line", pid)
}

// refused counts a refused connection and logs it, once per pid: a
// process retrying in a loop would otherwise flood the agent's log.
func (l *listener) refused(cred *unix.Ucred, err error) {
	if l.access.Refused != nil {
		l.access.Refused()
	}
	if err != nil {
		l.log.Warn("connection refused", "socket", l.socket, "err", err)
		return
	}
	if !l.firstFrom(cred.Pid) {
		return
	}
	l.log.Warn("connection refused: not root nor in the socket group", "socket", l.socket,
		"pid", cred.Pid, "uid", cred.Uid, "gid", cred.Gid, "admits", l.access.String())
}

// firstFrom records pid as logged and says whether it was not yet.
func (l *listener) firstFrom(pid int32) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.logged[pid] {
		return false
	}
	if len(l.logged) >= maxLogged {
		clear(l.logged)
	}
	l.logged[pid] = true
	return true
}
