package nodesocket_test

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/asuser"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// Dir makes the socket directory 0700 whoever created it and with
// whatever mode (kubelet's DirectoryOrCreate makes it 0755), or 0750 owned
// by the named group.
func TestDir_TightensWhateverCreatedIt(t *testing.T) {
	for _, tt := range []struct {
		name     string
		existing os.FileMode // 0: the directory does not exist yet
		access   nodesocket.Access
		wantMode os.FileMode
		wantGID  int // -1: the process's own
	}{
		{"created", 0, nodesocket.Access{}, 0o700, -1},
		{"pre-existing 0755", 0o755, nodesocket.Access{}, 0o700, -1},
		{"pre-existing 0777", 0o777, nodesocket.Access{}, 0o700, -1},
		{"pre-existing 0755, group named", 0o755, nodesocket.Group(asuser.TestGID), 0o750, asuser.TestGID},
		{"created, group named", 0, nodesocket.Group(asuser.TestGID), 0o750, asuser.TestGID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantGID >= 0 {
				vnodetest.RequireRoot(t) // chown to a group the process is not in
			}
			dir := filepath.Join(sockdir.New(t), "run")
			if tt.existing != 0 {
				if err := os.Mkdir(dir, tt.existing); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tt.existing); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			if err := tt.access.Dir(dir); err != nil {
				t.Fatalf("Dir: %v", err)
			}
			wantGID := tt.wantGID
			if wantGID < 0 {
				wantGID = os.Getegid()
			}
			asuser.CheckMode(t, dir, tt.wantMode, uint32(wantGID))
		})
	}
}

// Socket gives the socket 0600, or 0660 and the named group.
func TestSocket_Mode(t *testing.T) {
	for _, tt := range []struct {
		name     string
		access   nodesocket.Access
		wantMode os.FileMode
		wantGID  int
	}{
		{"root only", nodesocket.Access{}, 0o600, -1},
		{"group named", nodesocket.Group(asuser.TestGID), 0o660, asuser.TestGID},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantGID >= 0 {
				vnodetest.RequireRoot(t)
			}
			path := filepath.Join(sockdir.New(t), "f")
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := tt.access.Socket(path); err != nil {
				t.Fatalf("Socket: %v", err)
			}
			wantGID := tt.wantGID
			if wantGID < 0 {
				wantGID = os.Getegid()
			}
			asuser.CheckMode(t, path, tt.wantMode, uint32(wantGID))
		})
	}
}

// A directory other programs share is refused, not locked down, and so is
// a symlink in the directory's place.
func TestDir_RefusesSharedDirectories(t *testing.T) {
	base := sockdir.New(t)
	sticky := filepath.Join(base, "sticky")
	if err := os.Mkdir(sticky, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, os.ModeSticky|0o777); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(sticky, link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		dir, want string
	}{
		{"/", "shared"},
		{"/run", "shared"},
		{"/tmp", "shared"},
		{"/var/run", "shared"},
		{"/var/lib", "shared"},
		{sticky, "sticky"},
		{link, "not a directory"}, // O_NOFOLLOW|O_DIRECTORY on a symlink
	} {
		t.Run(tt.dir, func(t *testing.T) {
			err := nodesocket.Access{}.Dir(tt.dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Dir(%s) = %v, want an error containing %q", tt.dir, err, tt.want)
			}
		})
	}
	if fi, err := os.Stat(sticky); err != nil || fi.Mode().Perm() != 0o777 || fi.Mode()&os.ModeSticky == 0 {
		t.Errorf("the shared directory changed: %v, %v", fi.Mode(), err)
	}
}

func TestParseGroup(t *testing.T) {
	rootGroup, err := user.LookupGroupId("0")
	if err != nil {
		vnodetest.Unavailable(t, fmt.Sprintf("no group 0 in /etc/group: %v", err))
	}
	for _, tt := range []struct {
		in, want, wantErr string
	}{
		{"", "root", ""},
		{"0", "root and group 0", ""},
		{"61234", "root and group 61234", ""},
		{rootGroup.Name, "root and group 0", ""},
		{"no-such-group-hwnet", "", "give its GID"},
		{"-1", "", "give its GID"},
		{"4294967295", "", "give its GID"},
	} {
		t.Run(tt.in, func(t *testing.T) {
			a, err := nodesocket.ParseGroup(tt.in)
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("ParseGroup(%q) = %v, %v; want an error containing %q", tt.in, a, err, tt.wantErr)
			case tt.wantErr == "" && (err != nil || a.String() != tt.want):
				t.Errorf("ParseGroup(%q) = %v, %v; want %s", tt.in, a, err, tt.want)
			}
		})
	}
}
