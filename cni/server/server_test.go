package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/logtest"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

type handlerFunc func(ctx context.Context, req *wire.Request) (json.RawMessage, error)

func (f handlerFunc) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	return f(ctx, req)
}

// echo answers with the request itself, so a test sees every field arrive.
func echo(_ context.Context, req *wire.Request) (json.RawMessage, error) {
	return json.Marshal(req)
}

type running struct {
	socket string
	client *wire.Client
	logs   *logtest.Buffer
	stop   func() error
}

func start(t testing.TB, h server.Handler) *running {
	t.Helper()
	return startIn(t, h, sockdir.New(t), nodesocket.Access{})
}

// startIn serves h on dir/run/cni.sock to the peers access admits.
func startIn(t testing.TB, h server.Handler, dir string, access nodesocket.Access) *running {
	t.Helper()
	socket := filepath.Join(dir, "run", "cni.sock")
	logs := &logtest.Buffer{}
	srv := server.New(h, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), access)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, socket) }()
	sockdir.Await(t, socket, done)
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-done })
		return serveErr
	}
	t.Cleanup(func() { _ = stop() })
	return &running{socket: socket, client: wire.NewClient(socket), logs: logs, stop: stop}
}

func request(command string) *wire.Request {
	return &wire.Request{Command: command, ContainerID: "ctr-1", Netns: "/var/run/netns/ctr-1", IfName: "eth0",
		Args: "K8S_POD_NAME=p", Path: "/opt/cni/bin", Config: json.RawMessage(`{"cniVersion":"1.1.0","name":"hwnet","type":"hwnet"}`)}
}

// TestSpecParameters_RoundTripEveryCommand sends every command the agent
// handles and checks every CNI parameter reaches the handler unchanged.
func TestSpecParameters_RoundTripEveryCommand(t *testing.T) {
	srv := start(t, handlerFunc(echo))
	for _, command := range []string{wire.CommandAdd, wire.CommandDel, wire.CommandCheck, wire.CommandStatus, wire.CommandGC} {
		t.Run(command, func(t *testing.T) {
			req := request(command)
			resp, err := srv.client.Do(context.Background(), req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			want, _ := json.Marshal(req)
			if resp.Error != nil || !bytes.Equal(resp.Result, want) {
				t.Errorf("response = result %s error %v, want result %s", resp.Result, resp.Error, want)
			}
		})
	}
}

// TestSpecWellKnownErrorCodes checks the agent's CNI error codes reach the
// shim unchanged, and anything else becomes 999 (CNI spec "Result" and
// "Well-known Error Codes").
func TestSpecWellKnownErrorCodes(t *testing.T) {
	srv := start(t, handlerFunc(func(_ context.Context, req *wire.Request) (json.RawMessage, error) {
		switch req.Args {
		case "code11":
			return nil, types.NewError(types.ErrTryAgainLater, "busy", "pod cache warming up")
		case "code7":
			return nil, types.NewError(types.ErrInvalidNetworkConfig, "bad NAD", "")
		case "wrapped":
			return nil, fmt.Errorf("network ns/sriov: %w", types.NewError(types.ErrUnknownContainer, "no such pod", ""))
		case "plain":
			return nil, errors.New("kaputt")
		case "panic":
			panic("handler bug")
		case "invalid":
			return json.RawMessage(`{"cniVersion":`), nil
		}
		return nil, nil
	}))
	tests := []struct {
		args     string
		wantCode uint
		wantMsg  string
	}{
		{"code11", types.ErrTryAgainLater, "busy"},
		{"code7", types.ErrInvalidNetworkConfig, "bad NAD"},
		{"wrapped", types.ErrUnknownContainer, "network ns/sriov: no such pod"},
		{"plain", types.ErrInternal, "kaputt"},
		{"panic", types.ErrInternal, "panic: handler bug"},
		{"invalid", types.ErrInternal, "invalid ADD result"},
	}
	for _, tc := range tests {
		t.Run(tc.args, func(t *testing.T) {
			req := request(wire.CommandAdd)
			req.Args = tc.args
			resp, err := srv.client.Do(context.Background(), req)
			if err != nil {
				t.Fatalf("Do: %v", err)
			}
			if resp.Error == nil || resp.Error.Code != tc.wantCode || !strings.Contains(resp.Error.Msg, tc.wantMsg) {
				t.Fatalf("error = %+v, want code %d with %q", resp.Error, tc.wantCode, tc.wantMsg)
			}
		})
	}
	// The agent survived the panic.
	if _, err := srv.client.Do(context.Background(), request(wire.CommandStatus)); err != nil {
		t.Fatalf("request after a handler panic: %v", err)
	}
	if !strings.Contains(strings.Join(srv.logs.Lines(), "\n"), "stack=") {
		t.Error("the panic's stack was not logged")
	}
}

// TestClientGoneCancelsHandler: a runtime that kills the shim must not
// leave the agent working for nobody.
func TestClientGoneCancelsHandler(t *testing.T) {
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	srv := start(t, handlerFunc(func(ctx context.Context, _ *wire.Request) (json.RawMessage, error) {
		close(started)
		select {
		case <-ctx.Done():
			cancelled <- ctx.Err()
		case <-time.After(30 * time.Second):
			cancelled <- errors.New("handler context never ended")
		}
		return nil, ctx.Err()
	}))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	if _, err := srv.client.Do(ctx, request(wire.CommandAdd)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("handler: %v", err)
	}
}

// TestSpecSerialization_RequestsRunConcurrently: the runtime may run
// operations for different containers in parallel (NPWG 7.3), so one slow
// ADD must not hold up the others.
func TestSpecSerialization_RequestsRunConcurrently(t *testing.T) {
	const n = 8
	var arrived sync.WaitGroup
	arrived.Add(n)
	allIn := make(chan struct{})
	go func() { arrived.Wait(); close(allIn) }()
	srv := start(t, handlerFunc(func(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
		arrived.Done()
		select {
		case <-allIn:
			return json.RawMessage(`{}`), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			req := request(wire.CommandAdd)
			req.ContainerID = fmt.Sprintf("ctr-%d", i)
			_, err := srv.client.Do(ctx, req)
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent request: %v (requests were serialised)", err)
		}
	}
}

func TestSocketModeAndRemovalOnShutdown(t *testing.T) {
	srv := start(t, handlerFunc(echo))
	fi, err := os.Lstat(srv.socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode = %s, want a socket with 0600", fi.Mode())
	}
	dir, err := os.Stat(filepath.Dir(srv.socket))
	if err != nil {
		t.Fatal(err)
	}
	if dir.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode = %s, want 0700", dir.Mode().Perm())
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Lstat(srv.socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after shutdown: %v, want it removed", err)
	}
	if _, err := srv.client.Do(context.Background(), request(wire.CommandStatus)); !errors.Is(err, wire.ErrUnreachable) {
		t.Errorf("request after shutdown = %v, want ErrUnreachable", err)
	}
}

func TestServeSocketPathConflicts(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, socket string)
		wantErr string
	}{
		{"stale socket of a dead agent is replaced", func(t *testing.T, socket string) {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
		}, ""},
		{"live agent's socket is left alone", func(t *testing.T, socket string) {
			ln, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
		}, "is in use"},
		{"regular file is not deleted", func(t *testing.T, socket string) {
			if err := os.WriteFile(socket, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a socket"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(sockdir.New(t), "cni.sock")
			tc.prepare(t, socket)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				done <- server.New(handlerFunc(echo), slog.New(slog.DiscardHandler), nodesocket.Access{}).Serve(ctx, socket)
			}()
			if tc.wantErr != "" {
				err := <-done
				cancel()
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Serve = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			sockdir.Await(t, socket, done)
			if _, err := wire.NewClient(socket).Do(context.Background(), request(wire.CommandStatus)); err != nil {
				t.Errorf("request: %v", err)
			}
			cancel()
			if err := <-done; err != nil {
				t.Fatalf("Serve: %v", err)
			}
		})
	}
}

// TestWireVersionMismatch: a shim and an agent from different releases get
// a CNI error saying so, not a misread request.
func TestWireVersionMismatch(t *testing.T) {
	srv := start(t, handlerFunc(echo))
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", srv.socket)
	}}}
	body, _ := json.Marshal(request(wire.CommandAdd))
	req, _ := http.NewRequest(http.MethodPost, "http://agent"+wire.Path, bytes.NewReader(body))
	req.Header.Set(wire.VersionHeader, "0")
	hresp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer hresp.Body.Close()
	var resp wire.Response
	if err := json.NewDecoder(hresp.Body).Decode(&resp); err != nil {
		t.Fatal(err)
	}
	if resp.Error == nil || !strings.Contains(resp.Error.Msg, "different releases") {
		t.Fatalf("response = %+v, want an error about different releases", resp)
	}
}

// TestOneLogLinePerRequest: operators find each CNI call in the agent's
// log with its command, container, duration and error: at Info, or Error
// when it failed; but STATUS, which containerd 2.x sends every 5 s, at
// Debug unless it failed.
func TestOneLogLinePerRequest(t *testing.T) {
	srv := start(t, handlerFunc(func(_ context.Context, req *wire.Request) (json.RawMessage, error) {
		if req.Command == wire.CommandDel || req.Args == "fail" {
			return nil, types.NewError(types.ErrTryAgainLater, "busy", "")
		}
		return json.RawMessage(`{}`), nil
	}))
	for _, tt := range []struct {
		command, args string
		want          []string
	}{
		{wire.CommandAdd, "", []string{"level=INFO", "command=ADD", "containerID=ctr-1", "duration="}},
		{wire.CommandDel, "", []string{"level=ERROR", "command=DEL", "containerID=ctr-1", "duration=", "err=busy", "code=11"}},
		{wire.CommandStatus, "", []string{"level=DEBUG", "command=STATUS", "duration="}},
		{wire.CommandStatus, "fail", []string{"level=ERROR", "command=STATUS", "duration=", "err=busy", "code=11"}},
	} {
		req := request(tt.command)
		req.Args = tt.args
		if _, err := srv.client.Do(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		lines := srv.logs.Lines()
		if len(lines) == 0 {
			t.Fatalf("%s %q: no log line", tt.command, tt.args)
		}
		for _, w := range tt.want {
			if last := lines[len(lines)-1]; !strings.Contains(last, w) {
				t.Errorf("%s %q: log line %q lacks %q", tt.command, tt.args, last, w)
			}
		}
	}
	if lines := srv.logs.Lines(); len(lines) != 4 {
		t.Errorf("log has %d lines, want 4:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
