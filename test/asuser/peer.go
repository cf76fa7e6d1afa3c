package asuser

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestGID is a group no one on the machine needs to have: the kernel
// takes any number.
const TestGID = 61234

// Peer is a client of a node socket served with Access, and what the
// socket must do with it: Answered or Refused.
type Peer struct {
	Name   string
	Access nodesocket.Access
	User   User
	// OpenToAll makes the socket and its directory anyone's, as an
	// operator's chmod or a runtime's mount could: then only the peer
	// check is left.
	OpenToAll bool
	Want      int
}

// Peers are the clients every node socket must sort alike: root and the
// named group's members (by primary or supplementary group) answered;
// anyone else refused, by the directory's mode and, with the modes opened
// to all, by the peer check.
func Peers() []Peer {
	nobody := User{UID: NobodyID, GID: NobodyID}
	member := User{UID: NobodyID, GID: TestGID}
	supplementary := User{UID: NobodyID, GID: NobodyID, Groups: []uint32{TestGID}}
	group := nodesocket.Group(TestGID)
	return []Peer{
		{"root", nodesocket.Access{}, User{}, false, Answered},
		{"nobody", nodesocket.Access{}, nobody, false, Refused},
		{"nobody, modes opened to all", nodesocket.Access{}, nobody, true, Refused},
		{"group member, no group named", nodesocket.Access{}, member, true, Refused},
		{"group member", group, member, false, Answered},
		{"supplementary group member", group, supplementary, false, Answered},
		{"nobody, group named", group, nobody, false, Refused},
		{"nobody, group named, modes opened to all", group, nobody, true, Refused},
	}
}

// Serve starts a node socket under dir with access, for the test's
// lifetime, and returns its path.
type Serve func(t *testing.T, dir string, access nodesocket.Access) (socket string)

// CheckPeers runs each of Peers as a subtest: serve starts the socket in
// a fresh directory open enough that the socket's own directory decides,
// the client of mode runs against it as the peer's user and must exit as
// the peer wants, then served checks the server's side: that it handled
// the request when answered, and nothing otherwise.
func CheckPeers(t *testing.T, mode string, serve Serve, served func(t *testing.T, answered bool)) {
	vnodetest.RequireRoot(t) // runs clients as other users
	for _, p := range Peers() {
		t.Run(p.Name, func(t *testing.T) {
			dir := sockdir.New(t)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			socket := serve(t, dir, p.Access)
			if p.OpenToAll {
				chmod(t, filepath.Dir(socket), 0o777)
				chmod(t, socket, 0o666)
			}
			code, out := Run(t, p.User, mode, socket)
			if code != p.Want {
				t.Fatalf("client %s as %+v exited %d, want %d; output:\n%s", mode, p.User, code, p.Want, out)
			}
			served(t, p.Want == Answered)
		})
	}
}

// Mkdir makes dir with exactly mode, whatever the umask: a socket's
// directory made before the server starts, as kubelet's hostPath
// DirectoryOrCreate makes /run/hwnet 0755.
func Mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, mode); err != nil {
		t.Fatal(err)
	}
	chmod(t, dir, mode)
}

// CheckMode checks that a node socket or its directory has exactly mode,
// no sticky, setuid or setgid bit, this process's user as owner and group
// gid.
func CheckMode(t *testing.T, path string, mode os.FileMode, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != mode || fi.Mode()&(os.ModeSticky|os.ModeSetuid|os.ModeSetgid) != 0 ||
		int(st.Uid) != os.Geteuid() || st.Gid != gid {
		t.Errorf("%s: mode %s owner %d:%d, want %s owned by %d:%d", path, fi.Mode(), st.Uid, st.Gid, mode, os.Geteuid(), gid)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
