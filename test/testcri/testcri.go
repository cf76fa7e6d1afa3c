// Package testcri is a container runtime's CRI RuntimeService, as far as
// ListPodSandbox goes, over real gRPC on a unix socket: for tests of what
// asks the runtime which pod sandboxes exist. It lists the sandboxes the
// test sets; every other call answers Unimplemented.
package testcri

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/hwnet-io/hwnet/test/sockdir"
)

// Runtime serves the RuntimeService on Socket until the test ends.
type Runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	Socket string

	mu        sync.Mutex
	sandboxes []*runtimeapi.PodSandbox
	lists     int
	conns     int
	srv       *grpc.Server
}

// Start serves a runtime listing no sandbox.
func Start(t testing.TB) *Runtime {
	t.Helper()
	r := &Runtime{Socket: filepath.Join(sockdir.New(t), "cri.sock")}
	r.Serve(t)
	t.Cleanup(r.Stop)
	return r
}

// Serve serves on Socket again after Stop, as a restarted runtime does:
// it replaces the socket file the last left.
func (r *Runtime) Serve(t testing.TB) {
	t.Helper()
	if err := os.Remove(r.Socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("testcri: %v", err)
	}
	l, err := net.Listen("unix", r.Socket)
	if err != nil {
		t.Fatalf("testcri: %v", err)
	}
	// A runtime that is killed leaves its socket file behind.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, r)
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(countingListener{Listener: l, r: r})
}

// Stop ends serving and every connection, leaving the socket file, as a
// runtime that is killed does.
func (r *Runtime) Stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Stop()
	}
}

// Conns is how many connections the runtime accepted.
func (r *Runtime) Conns() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns
}

// countingListener counts the connections it accepts into r.
type countingListener struct {
	net.Listener
	r *Runtime
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.r.mu.Lock()
		l.r.conns++
		l.r.mu.Unlock()
	}
	return c, err
}

// Set replaces the sandboxes the runtime lists.
func (r *Runtime) Set(sandboxes ...*runtimeapi.PodSandbox) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes = slices.Clone(sandboxes)
}

// Lists is how many ListPodSandbox calls the runtime answered.
func (r *Runtime) Lists() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists
}

// ListPodSandbox lists every sandbox set; it ignores the filter.
func (r *Runtime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lists++
	return &runtimeapi.ListPodSandboxResponse{Items: slices.Clone(r.sandboxes)}, nil
}

// Sandbox is a ready sandbox of the pod namespace/name with uid.
func Sandbox(id, namespace, name, uid string) *runtimeapi.PodSandbox {
	return &runtimeapi.PodSandbox{Id: id, State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Namespace: namespace, Name: name, Uid: uid}}
}
