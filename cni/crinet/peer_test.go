package crinet_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/asuser"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// A process that is not root, nor in the named group, cannot set a
// network: the directory's mode stops it, and with the modes opened to
// all (an operator's chmod), the peer check does. Root and the group's
// members can.
func TestCRINet_Socket_AdmitsRootAndTheGroupOnly(t *testing.T) {
	var h *harness
	asuser.CheckPeers(t, "set", func(t *testing.T, dir string, access nodesocket.Access) string {
		h = newHarnessIn(t, dir, access)
		h.list() // served
		return h.socket
	}, func(t *testing.T, answered bool) {
		if _, set := h.list()["cnf/intruder"]; set != answered {
			t.Errorf("network cnf/intruder set: %t, want %t", set, answered)
		}
	})
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
		{"group named", nodesocket.Group(asuser.TestGID), 0o750, 0o660, asuser.TestGID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vnodetest.RequireRoot(t) // owners are root's, groups chowned
			dir := sockdir.New(t)
			asuser.Mkdir(t, filepath.Join(dir, "run"), 0o755)
			h := newHarnessIn(t, dir, tt.access)
			h.list()
			asuser.CheckMode(t, filepath.Dir(h.socket), tt.wantDir, tt.wantGID)
			asuser.CheckMode(t, h.socket, tt.wantSocket, tt.wantGID)
		})
	}
}
