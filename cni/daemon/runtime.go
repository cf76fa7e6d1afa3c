package daemon

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// criTimeout bounds one ListPodSandbox: a runtime that does not answer
// skips a reconcile round rather than holding the loop.
const criTimeout = 10 * time.Second

// podKey names a pod by namespace and name: what a sandbox's metadata, a
// pod from the API server (a static pod's mirror included, whose UID is
// not its sandbox's) and an attachment record share.
type podKey struct{ namespace, name string }

// runtimeAnswer is what the container runtime said exists.
type runtimeAnswer struct {
	socket string
	// sandboxes are the IDs of its pod sandboxes, ready or not, and pods
	// the pods they are for.
	sandboxes map[string]bool
	pods      map[podKey]bool
}

// liveSandboxes asks the container runtime, through the CRI, which pod
// sandboxes exist, ready or not.
func liveSandboxes(ctx context.Context, socket string) (runtimeAnswer, error) {
	if _, err := os.Stat(socket); err != nil {
		return runtimeAnswer{}, fmt.Errorf("CRI socket: %w", err)
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return runtimeAnswer{}, fmt.Errorf("CRI %s: %w", socket, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(conn).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return runtimeAnswer{}, fmt.Errorf("CRI %s: ListPodSandbox: %w", socket, err)
	}
	a := runtimeAnswer{socket: socket, sandboxes: make(map[string]bool, len(resp.Items)), pods: make(map[podKey]bool, len(resp.Items))}
	for _, s := range resp.Items {
		a.sandboxes[s.Id] = true
		if m := s.GetMetadata(); m != nil {
			a.pods[podKey{m.Namespace, m.Name}] = true
		}
	}
	return a, nil
}

// ownPluginConf is hwnet's plugin configuration in its configuration list,
// with the list's name and version, as the runtime passes it.
func ownPluginConf(path string) ([]byte, error) {
	list, err := netconf.LoadFile(path)
	if err != nil {
		return nil, err
	}
	conf, err := chain.PluginConfig(list, list.Plugins[0], nil, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return conf, nil
}
