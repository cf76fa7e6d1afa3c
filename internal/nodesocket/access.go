// Package nodesocket guards hwnet-agent's sockets on the node, the CNI
// socket and the CRI network API's: who may connect, by the kernel's word
// on the peer (SO_PEERCRED) rather than by file modes alone, which a
// directory created by someone else (kubelet's hostPath DirectoryOrCreate
// makes /run/hwnet 0755) or an operator's chmod can widen; and the modes
// of the sockets and their directory.
package nodesocket

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/user"
	"strconv"
)

// Access says who may connect to a socket: root, the agent's own user
// (which can do all the socket offers anyway; a non-root agent in tests)
// and, when a group is named, that group's members. The zero Access
// admits root and the agent's user only.
type Access struct {
	gid     uint32
	grouped bool
	// Refused, when set, is told of each connection refused: a metric.
	Refused func()
}

// Group returns the Access that also admits the members of gid.
func Group(gid uint32) Access {
	return Access{gid: gid, grouped: true}
}

// ParseGroup reads --socket-group: "" admits root only, a number is a
// GID, anything else a group name looked up in the agent's /etc/group
// (in a container, the image's: a GID is what names a node's group).
func ParseGroup(s string) (Access, error) {
	if s == "" {
		return Access{}, nil
	}
	if n, err := strconv.ParseUint(s, 10, 32); err == nil && n != math.MaxUint32 {
		return Group(uint32(n)), nil
	}
	g, err := user.LookupGroup(s)
	var unknown user.UnknownGroupError
	if errors.As(err, &unknown) {
		return Access{}, fmt.Errorf("socket group %q: no such group in the agent's /etc/group; give its GID", s)
	}
	if err != nil {
		return Access{}, fmt.Errorf("socket group %q: %w", s, err)
	}
	n, err := strconv.ParseUint(g.Gid, 10, 32)
	if err != nil {
		return Access{}, fmt.Errorf("socket group %q: GID %q: %w", s, g.Gid, err)
	}
	return Group(uint32(n)), nil
}

// String says whom a admits, for logs.
func (a Access) String() string {
	if a.grouped {
		return fmt.Sprintf("root and group %d", a.gid)
	}
	return "root"
}

// dirMode and socketMode are the modes Dir and Socket set: the group gets
// in only when one is named.
func (a Access) dirMode() uint32 {
	if a.grouped {
		return 0o750
	}
	return 0o700
}

func (a Access) socketMode() os.FileMode {
	if a.grouped {
		return 0o660
	}
	return 0o600
}

// owner is the uid and gid Dir and Socket give their files: the agent's
// user, and the named group or the agent's.
func (a Access) owner() (uid, gid int) {
	if a.grouped {
		return os.Geteuid(), int(a.gid)
	}
	return os.Geteuid(), os.Getegid()
}
