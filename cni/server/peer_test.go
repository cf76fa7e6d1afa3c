package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/asuser"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// A process that is not root, nor in the named group, never gets a
// request to the handler: the directory's mode stops it, and with the
// modes opened to all, the peer check does. Root and the group's members
// are served.
func TestSocket_AdmitsRootAndTheGroupOnly(t *testing.T) {
	var handled atomic.Int32
	counting := handlerFunc(func(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
		handled.Add(1)
		return echo(ctx, req)
	})
	asuser.CheckPeers(t, "cni", func(t *testing.T, dir string, access nodesocket.Access) string {
		handled.Store(0)
		return startIn(t, counting, dir, access).socket
	}, func(t *testing.T, answered bool) {
		want := int32(0)
		if answered {
			want = 1
		}
		if got := handled.Load(); got != want {
			t.Errorf("the handler saw %d requests, want %d", got, want)
		}
	})
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
		{"pre-existing 0755, group named", 0o755, nodesocket.Group(asuser.TestGID), 0o750, 0o660, asuser.TestGID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vnodetest.RequireRoot(t) // owners are root's, groups chowned
			dir := sockdir.New(t)
			if tt.existing != 0 {
				asuser.Mkdir(t, filepath.Join(dir, "run"), tt.existing)
			}
			srv := startIn(t, handlerFunc(echo), dir, tt.access)
			asuser.CheckMode(t, filepath.Dir(srv.socket), tt.wantDir, tt.wantGID)
			asuser.CheckMode(t, srv.socket, tt.wantSocket, tt.wantGID)
		})
	}
}
