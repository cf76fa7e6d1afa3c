package delegate

import (
	"fmt"
	"strings"

	"github.com/hwnet-io/hwnet/cni/cache"
)

// podArgs are the runtime's CNI_ARGS: the pod a sandbox belongs to.
type podArgs struct {
	ref   cache.PodRef
	pairs [][2]string
}

// isPod tells a Kubernetes pod sandbox from a bare CNI call (cnitool, a
// runtime without Kubernetes), which gets only the default network.
func (p podArgs) isPod() bool { return p.ref.Namespace != "" && p.ref.Name != "" }

// parsePodArgs reads CNI_ARGS ("K1=V1;K2=V2", CNI spec section 3), keeping
// every pair for the delegates.
func parsePodArgs(s string) (podArgs, error) {
	var p podArgs
	if s == "" {
		return p, nil
	}
	for _, kv := range strings.Split(s, ";") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return p, fmt.Errorf("CNI_ARGS: %q is not KEY=VALUE", kv)
		}
		p.pairs = append(p.pairs, [2]string{k, v})
		switch k {
		case "K8S_POD_NAMESPACE":
			p.ref.Namespace = v
		case "K8S_POD_NAME":
			p.ref.Name = v
		case "K8S_POD_UID":
			p.ref.UID = v
		}
	}
	return p, nil
}
