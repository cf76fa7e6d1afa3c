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

// runtimeClient asks the container runtime, through the CRI at socket,
// over one connection kept between asks: a connection made for each ask
// was a dial, a gRPC transport and a handshake every reconcile interval
// on an idle node. A failed ask drops it, so the next dials afresh rather
// than wait out gRPC's reconnect backoff after a runtime restart.
type runtimeClient struct {
	socket string
	conn   *grpc.ClientConn
}

// sandboxes asks which pod sandboxes exist, ready or not.
func (c *runtimeClient) sandboxes(ctx context.Context) (runtimeAnswer, error) {
	if _, err := os.Stat(c.socket); err != nil {
		c.close()
		return runtimeAnswer{}, fmt.Errorf("CRI socket: %w", err)
	}
	if c.conn == nil {
		conn, err := grpc.NewClient("unix://"+c.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return runtimeAnswer{}, fmt.Errorf("CRI %s: %w", c.socket, err)
		}
		c.conn = conn
	}
	ctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := runtimeapi.NewRuntimeServiceClient(c.conn).ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		c.close()
		return runtimeAnswer{}, fmt.Errorf("CRI %s: ListPodSandbox: %w", c.socket, err)
	}
	a := runtimeAnswer{socket: c.socket, sandboxes: make(map[string]bool, len(resp.Items)), pods: make(map[podKey]bool, len(resp.Items))}
	for _, s := range resp.Items {
		a.sandboxes[s.Id] = true
		if m := s.GetMetadata(); m != nil {
			a.pods[podKey{m.Namespace, m.Name}] = true
		}
	}
	return a, nil
}

// close drops the connection, if any.
func (c *runtimeClient) close() {
	if c.conn != nil {
		_ = c.conn.Close() // an error says it was closed already
		c.conn = nil
	}
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
