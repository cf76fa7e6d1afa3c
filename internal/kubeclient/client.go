package kubeclient

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Instrumented copies cfg with wrap around its transport (the agent
// counts its API requests this way) and returns the copy, from which
// clients of other API groups are made, with a client of the built-in
// ones. cfg itself is left as it is: each side of the agent wraps its own.
func Instrumented(cfg *rest.Config, wrap transport.WrapperFunc) (*rest.Config, *kubernetes.Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("API server client: %w", err)
	}
	return cfg, client, nil
}
