package shim_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/api/agentrestart"
	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

// serveWithNotice serves fakeAgent on the node's socket as the agent
// does, leaving a restart notice that expects it back within backWithin
// when stop is called; stop returns once the socket is gone.
func (n *node) serveWithNotice(t *testing.T, backWithin time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv := server.New(handlerFunc(fakeAgent), slog.New(slog.DiscardHandler), nodesocket.Access{})
	srv.LeaveRestartNotice(backWithin)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, n.socket) }()
	sockdir.Await(t, n.socket, done)
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestStatusAcrossAgentRestart (CNI 1.1 STATUS): an agent that stops
// leaves word that it will be back within agentWait, and while it is away
// STATUS says the plugin is ready, since ADDs wait for it meanwhile: the
// runtime's network, and so the node, stays Ready across an agent's
// upgrade. Past the time it gave, or with no word (an agent killed), or
// with a word that cannot be read, STATUS says the plugin is not
// available (code 50). An agent that serves again takes its word back.
func TestStatusAcrossAgentRestart(t *testing.T) {
	n := newNode(t)
	config := n.config("1.1.0", "30s")
	notice := agentrestart.Path(n.socket)
	status := func() outcome { return run(context.Background(), cniEnv("STATUS"), config) }
	wantReady := func(when string) {
		t.Helper()
		if out := status(); out.code != 0 || out.stdout != "" {
			t.Fatalf("STATUS %s: exit %d, stdout %q; want ready (exit 0, nothing printed)", when, out.code, out.stdout)
		}
	}

	stop := n.serveWithNotice(t, 30*time.Second)
	wantReady("with the agent serving")
	if _, err := os.Stat(notice); !os.IsNotExist(err) {
		t.Fatalf("a serving agent left its restart notice: %v", err)
	}
	stop()
	out := status()
	if out.code != 0 || !out.stderr.Contains("hwnet-agent restarting") {
		t.Fatalf("STATUS with the agent restarting: exit %d, stdout %q, log %s; want ready, and why", out.code, out.stdout, out.stderr)
	}

	long := time.Now().Add(-time.Minute)
	if err := agentrestart.Leave(notice, &agentrestart.Notice{Stopped: long, Until: long.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	wantCNIError(t, status(), types.ErrPluginNotAvailable, "not reachable", "not back by", "as it said when it stopped")

	if err := os.WriteFile(notice, []byte(`{"version": 1, "until": "tomorrow"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	wantCNIError(t, status(), types.ErrPluginNotAvailable, "not reachable", n.socket)

	stop = n.serveWithNotice(t, 30*time.Second)
	wantReady("with the agent back")
	if _, err := os.Stat(notice); !os.IsNotExist(err) {
		t.Fatalf("the agent back left the torn notice: %v", err)
	}
	if err := os.Remove(n.socket); err != nil {
		t.Fatal(err)
	}
	wantCNIError(t, status(), types.ErrPluginNotAvailable, "not reachable", n.socket)
	stop()
}
