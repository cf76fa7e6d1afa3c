// Package testcri is a container runtime's CRI RuntimeService, as far as
// ListPodSandbox goes, over real gRPC on a unix socket: for tests of what
// asks the runtime which pod sandboxes exist. It lists the sandboxes the
// test sets; every other call answers Unimplemented.
package testcri

import (
	"context"
	"net"
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
}

// Start serves a runtime listing no sandbox.
func Start(t testing.TB) *Runtime {
	t.Helper()
	r := &Runtime{Socket: filepath.Join(sockdir.New(t), "cri.sock")}
	l, err := net.Listen("unix", r.Socket)
	if err != nil {
		t.Fatalf("testcri: %v", err)
	}
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, r)
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return r
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
