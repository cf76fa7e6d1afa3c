package nodesocket_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/asuser"
	"github.com/hwnet-io/hwnet/test/logtest"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// records are the listener's JSON log lines, decoded.
func records(t *testing.T, logs *logtest.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range logs.Lines() {
		if line == "" {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// pongServer is a guarded listener on a socket anyone may open, so only
// the peer check stands between a client and the handler, which answers
// each ping and counts it.
type pongServer struct {
	socket   string
	handled  atomic.Int32
	refused  atomic.Int32
	logs     *logtest.Buffer
	listener net.Listener
	done     chan struct{}
}

func servePong(t *testing.T, access nodesocket.Access) *pongServer {
	t.Helper()
	dir := sockdir.New(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	s := &pongServer{socket: filepath.Join(dir, "s.sock"), logs: &logtest.Buffer{}, done: make(chan struct{})}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.socket, 0o777); err != nil {
		t.Fatal(err)
	}
	access.Refused = func() { s.refused.Add(1) }
	s.listener = access.Listener(ln, "test socket", slog.New(slog.NewJSONHandler(s.logs, nil)))
	go s.serve()
	t.Cleanup(func() { s.listener.Close(); <-s.done })
	return s
}

func (s *pongServer) serve() {
	defer close(s.done)
	for {
		c, err := s.listener.Accept()
		if err != nil {
			return
		}
		if line, err := bufio.NewReader(c).ReadString('\n'); err == nil && line == "ping\n" {
			s.handled.Add(1)
			c.Write([]byte("pong\n"))
		}
		c.Close()
	}
}

// Root, the named group's members (by primary or supplementary group)
// get through; any other process is closed on before its ping is read.
func TestListener_AdmitsRootAndTheGroupOnly(t *testing.T) {
	vnodetest.RequireRoot(t) // runs clients as other users
	nobody := asuser.User{UID: asuser.NobodyID, GID: asuser.NobodyID}
	for _, tt := range []struct {
		name   string
		access nodesocket.Access
		user   asuser.User
		want   int
	}{
		{"root", nodesocket.Access{}, asuser.User{}, asuser.Answered},
		{"root with a group named", nodesocket.Group(asuser.TestGID), asuser.User{}, asuser.Answered},
		{"nobody", nodesocket.Access{}, nobody, asuser.Refused},
		{"nobody with another group named", nodesocket.Group(asuser.TestGID), nobody, asuser.Refused},
		{"primary group, none named", nodesocket.Access{}, asuser.User{UID: asuser.NobodyID, GID: asuser.TestGID}, asuser.Refused},
		{"primary group named", nodesocket.Group(asuser.TestGID), asuser.User{UID: asuser.NobodyID, GID: asuser.TestGID}, asuser.Answered},
		{"supplementary group named", nodesocket.Group(asuser.TestGID),
			asuser.User{UID: asuser.NobodyID, GID: asuser.NobodyID, Groups: []uint32{100, asuser.TestGID}}, asuser.Answered},
		{"root's group without root", nodesocket.Access{}, asuser.User{UID: asuser.NobodyID, GID: 0}, asuser.Refused},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := servePong(t, tt.access)
			code, out := asuser.Run(t, tt.user, "ping", s.socket)
			if code != tt.want {
				t.Fatalf("client as %+v exited %d, want %d; output:\n%s", tt.user, code, tt.want, out)
			}
			wantHandled := int32(0)
			if tt.want == asuser.Answered {
				wantHandled = 1
			}
			if got := s.handled.Load(); got != wantHandled {
				t.Errorf("handler saw %d pings, want %d", got, wantHandled)
			}
			if got := s.refused.Load(); got != 1-wantHandled {
				t.Errorf("refused %d connections, want %d", got, 1-wantHandled)
			}
		})
	}
}

// A refused process is counted each time and logged once, with its pid,
// uid and gid.
func TestListener_LogsARefusedPidOnce(t *testing.T) {
	vnodetest.RequireRoot(t) // runs clients as other users
	s := servePong(t, nodesocket.Access{})
	if code, out := asuser.Run(t, asuser.User{UID: asuser.NobodyID, GID: asuser.NobodyID}, "twice", s.socket); code != asuser.Refused {
		t.Fatalf("client exited %d, want %d; output:\n%s", code, asuser.Refused, out)
	}
	if got := s.refused.Load(); got != 2 {
		t.Errorf("refused %d connections, want 2", got)
	}
	logs := records(t, s.logs)
	if len(logs) != 1 {
		t.Fatalf("%d log lines, want 1: %v", len(logs), logs)
	}
	r := logs[0]
	if r["level"] != "WARN" || r["socket"] != "test socket" || r["uid"] != float64(asuser.NobodyID) ||
		r["gid"] != float64(asuser.NobodyID) || r["pid"] == nil || r["pid"] == float64(0) {
		t.Errorf("log line %v: want a warning naming the socket, the pid, uid %d and gid %d", r, asuser.NobodyID, asuser.NobodyID)
	}
}
