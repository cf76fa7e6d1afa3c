// Package kubeclient is how hwnet's binaries reach the API server: one
// client configuration, from a kubeconfig file or the pod's service
// account, with the rates and encodings a node agent needs.
package kubeclient

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// A node agent writes one status PATCH per pod sandbox and an Event now
// and then: kubelet's own defaults (50 per second, bursts of 100) let it
// keep up with a node starting all its pods at once, where client-go's
// defaults (5, bursts of 10) would queue the last PATCH for tens of
// seconds.
const (
	clientQPS   = 50
	clientBurst = 100
)

// RESTConfig returns the configuration of a client of the API server: from
// the kubeconfig file, or else the pod's in-cluster service account.
// Built-in objects come as protobuf, cheaper to decode than JSON; custom
// resources, which have no protobuf form, as JSON. Nothing comes gzipped:
// the API server compresses a watch event by event, and an idle agent's
// watches (a bookmark each a minute) paid a gzip stream each on both
// ends, for a few kilobytes a node's network carries without noticing.
func RESTConfig(kubeconfig string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client configuration: %w", err)
	}
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.DisableCompression = true
	return cfg, nil
}

// ForNode checks a node-side client's settings and resolves its
// configuration: cfg when the caller has one (tests), else RESTConfig's.
// side names who asks ("CNI", "DRA") in the errors, which name the
// agent's flags: they are what an admin fixes.
func ForNode(side, node, kubeconfig string, cfg *rest.Config) (*rest.Config, error) {
	if node == "" {
		return nil, fmt.Errorf("%s: the node name is not set (--node-name, or NODE_NAME from the downward API)", side)
	}
	if cfg != nil {
		return cfg, nil
	}
	cfg, err := RESTConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("%s: API server client (--kubeconfig %q): %w", side, kubeconfig, err)
	}
	return cfg, nil
}
