package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"k8s.io/client-go/kubernetes"
)

// PodsOptions says where StartPods finds pods.
type PodsOptions struct {
	// KubeletSocket is kubelet's Pods API socket; empty means
	// DefaultPodsSocket.
	KubeletSocket string
	// Client and NodeName serve the informer used where kubelet does not
	// serve the Pods API.
	Client   kubernetes.Interface
	NodeName string
	// OnPod, if set, is told of every pod added or changed, and OnEnd of
	// every pod that ends (phase Succeeded or Failed) or goes; neither
	// may block.
	OnPod  func(Pod)
	OnEnd  func(Pod)
	Logger *slog.Logger
}

// StartPods starts the best PodSource the node offers and runs it until ctx
// ends: kubelet's Pods API, which costs the API server nothing, or else an
// informer on the node's pods. The string says which, for the log.
func StartPods(ctx context.Context, o PodsOptions) (PodSource, string, error) {
	if o.KubeletSocket == "" {
		o.KubeletSocket = DefaultPodsSocket
	}
	k := NewKubeletPods(o.KubeletSocket, o.Logger)
	k.Notify(o.OnPod, o.OnEnd)
	stopped := make(chan error, 1)
	go func() { stopped <- k.Run(ctx) }()
	var why error
	select {
	case <-k.synced:
		return k, "kubelet Pods API at " + o.KubeletSocket, nil
	case why = <-stopped:
	}
	switch {
	case why == nil:
		return nil, "", fmt.Errorf("start pod source: %w", ctx.Err())
	case !errors.Is(why, ErrPodsAPIUnavailable):
		return nil, "", why
	}
	if o.Client == nil || o.NodeName == "" {
		return nil, "", fmt.Errorf("%w, and no API client and node name to watch pods with instead", why)
	}
	p := NewInformerPods(o.Client, o.NodeName, o.Logger)
	p.Notify(o.OnPod, o.OnEnd)
	go func() {
		if err := p.Run(ctx); err != nil {
			o.Logger.Error("pod informer stopped", "err", err)
		}
	}()
	return p, fmt.Sprintf("pod informer on node %s (%v)", o.NodeName, why), nil
}
