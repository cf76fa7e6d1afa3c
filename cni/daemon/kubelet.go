package daemon

import (
	"context"
	"fmt"
	"sync"

	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// kubeletDevices connects to kubelet's PodResources API on first use and
// keeps the connection, which gRPC re-establishes across kubelet restarts.
type kubeletDevices struct {
	// life ends when the daemon stops; so do the calls under way then.
	life context.Context
	// socket is kubelet's PodResources socket; "" is its default place.
	socket  string
	metrics *metrics.Metrics
	mu      sync.Mutex
	client  *podresources.Client
}

func (k *kubeletDevices) Get(ctx context.Context, namespace, name string) (podresources.Pod, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(k.life, cancel)()
	c, err := k.connect(ctx)
	if err != nil {
		k.metrics.PodResourcesRequest(err)
		return podresources.Pod{}, err
	}
	pod, err := c.Get(ctx, namespace, name)
	k.metrics.PodResourcesRequest(err)
	return pod, err
}

func (k *kubeletDevices) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		k.client.Close()
		k.client = nil
	}
}

func (k *kubeletDevices) connect(ctx context.Context) (*podresources.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		return k.client, nil
	}
	c, err := podresources.Dial(ctx, k.socket)
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources at %s: %w", k.socket, err)
	}
	k.client = c
	return c, nil
}
