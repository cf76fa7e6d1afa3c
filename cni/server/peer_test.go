package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/asuser"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// testGID is a group no one on the machine needs to have: the kernel
// takes any number.
const testGID = 61234

// openToAll makes the socket and its directory anyone's, as an operator's
// chmod or a runtime's mount could: then only the peer check is left.
func openToAll(t *testing.T, socket string) {
	t.Helper()
	for path, mode := range map[string]os.FileMode{filepath.Dir(socket): 0o777, socket: 0o666} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
}

// A process that is not root, nor in the named group, never gets a
// request to the handler: the directory's mode stops it, and with the
// modes opened to all, the peer check does. Root and the group's members
// are served.
func TestSocket_AdmitsRootAndTheGroupOnly(t *testing.T) {
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
		{"nobody, group named", nodesocket.Group(testGID), nobody, false, asuser.Refused},
		{"nobody, group named, modes opened to all", nodesocket.Group(testGID), nobody, true, asuser.Refused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var handled atomic.Int32
			counting := handlerFunc(func(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
				handled.Add(1)
				return echo(ctx, req)
			})
			dir := sockdir.New(t)
			if err := os.Chmod(dir, 0o755); err != nil { // so the socket's own directory decides
				t.Fatal(err)
			}
			srv := startIn(t, counting, dir, tt.access)
			if tt.openToAll {
				openToAll(t, srv.socket)
			}
			code, out := asuser.Run(t, tt.user, "cni", srv.socket)
			if code != tt.want {
				t.Fatalf("shim as %+v exited %d, want %d; output:\n%s", tt.user, code, tt.want, out)
			}
			want := int32(0)
			if tt.want == asuser.Answered {
				want = 1
			}
			if got := handled.Load(); got != want {
				t.Errorf("the handler saw %d requests, want %d", got, want)
			}
		})
	}
}

// The socket's directory ends 0700 (0750 for the named group) whatever
// made it and with whatever mode: kubelet's hostPath DirectoryOrCreate
// makes /run/hwnet 0755 before the agent starts.
func TestSocket_DirectoryTightened(t *testing.T) {
	for _, tt := range []struct {
		name       string
		existing   os.FileMode // 0: the agent creates it
		access     nodesocket.Access
		wantDir    os.FileMode
		wantSocket os.FileMode
		wantGID    uint32
	}{
		{"created", 0, nodesocket.Access{}, 0o700, 0o600, 0},
		{"pre-existing 0755", 0o755, nodesocket.Access{}, 0o700, 0o600, 0},
		{"pre-existing 0755, group named", 0o755, nodesocket.Group(testGID), 0o750, 0o660, testGID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vnodetest.RequireRoot(t) // owners are root's, groups chowned
			dir := sockdir.New(t)
			if tt.existing != 0 {
				run := filepath.Join(dir, "run")
				if err := os.Mkdir(run, tt.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(run, tt.existing); err != nil {
					t.Fatal(err)
				}
			}
			srv := startIn(t, handlerFunc(echo), dir, tt.access)
			checkMode(t, filepath.Dir(srv.socket), tt.wantDir, tt.wantGID)
			checkMode(t, srv.socket, tt.wantSocket, tt.wantGID)
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
