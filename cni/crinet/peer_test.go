package crinet_test

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/asuser"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// testGID is a group no one on the machine needs to have: the kernel
// takes any number.
const testGID = 61234

// A process that is not root, nor in the named group, cannot set a
// network: the directory's mode stops it, and with the modes opened to
// all (an operator's chmod), the peer check does. Root and the group's
// members can.
func TestCRINet_Socket_AdmitsRootAndTheGroupOnly(t *testing.T) {
	vnodetest.RequireRoot(t) // runs clients as other users
	nobody := asuser.User{UID: asuser.NobodyID, GID: asuser.NobodyID}
	member := asuser.User{UID: asuser.NobodyID, GID: testGID}
	supplementary := asuser.User{UID: asuser.NobodyID, GID: asuser.NobodyID, Groups: []uint32{testGID}}
	for _, tt := range []struct {
		name      string
		access    nodesocket.Access
		user      asuser.User
		openToAll bool
		want      int
	}{
		{"root", nodesocket.Access{}, asuser.User{}, false, asuser.Answered},
		{"nobody", nodesocket.Access{}, nobody, false, asuser.Refused},
		{"nobody, modes opened to all", nodesocket.Access{}, nobody, true, asuser.Refused},
		{"group member, no group named", nodesocket.Access{}, member, true, asuser.Refused},
		{"group member", nodesocket.Group(testGID), member, false, asuser.Answered},
		{"supplementary group member", nodesocket.Group(testGID), supplementary, false, asuser.Answered},
		{"nobody, group named, modes opened to all", nodesocket.Group(testGID), nobody, true, asuser.Refused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := sockdir.New(t)
			if err := os.Chmod(dir, 0o755); err != nil { // so the socket's own directory decides
				t.Fatal(err)
			}
			h := newHarnessIn(t, dir, tt.access)
			h.list() // served
			if tt.openToAll {
				for path, mode := range map[string]os.FileMode{filepath.Dir(h.socket): 0o777, h.socket: 0o666} {
					if err := os.Chmod(path, mode); err != nil {
						t.Fatal(err)
					}
				}
			}
			code, out := asuser.Run(t, tt.user, "set", h.socket)
			if code != tt.want {
				t.Fatalf("runtime as %+v exited %d, want %d; output:\n%s", tt.user, code, tt.want, out)
			}
			if _, set := h.list()["cnf/intruder"]; set != (tt.want == asuser.Answered) {
				t.Errorf("network cnf/intruder set: %t, want %t", set, tt.want == asuser.Answered)
			}
		})
	}
}

// The socket's directory ends 0700 (0750 for the named group) whatever
// made it: kubelet's hostPath DirectoryOrCreate makes /run/hwnet 0755.
func TestCRINet_Socket_DirectoryTightened(t *testing.T) {
	for _, tt := range []struct {
		name       string
		access     nodesocket.Access
		wantDir    os.FileMode
		wantSocket os.FileMode
		wantGID    uint32
	}{
		{"root only", nodesocket.Access{}, 0o700, 0o600, 0},
		{"group named", nodesocket.Group(testGID), 0o750, 0o660, testGID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vnodetest.RequireRoot(t) // owners are root's, groups chowned
			dir := sockdir.New(t)
			if err := os.Mkdir(filepath.Join(dir, "run"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(dir, "run"), 0o755); err != nil {
				t.Fatal(err)
			}
			h := newHarnessIn(t, dir, tt.access)
			h.list()
			checkMode(t, filepath.Dir(h.socket), tt.wantDir, tt.wantGID)
			checkMode(t, h.socket, tt.wantSocket, tt.wantGID)
		})
	}
}

func checkMode(t *testing.T, path string, mode os.FileMode, gid uint32) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != mode || st.Uid != 0 || st.Gid != gid {
		t.Errorf("%s: mode %s owner %d:%d, want %s owned by 0:%d", path, fi.Mode().Perm(), st.Uid, st.Gid, mode, gid)
	}
}
