package selection

import (
	"encoding/json"
	"math"
	"strings"
)

// Annotation is the pod annotation that selects secondary networks (NPWG spec 4.1).
const Annotation = "k8s.v1.cni.cncf.io/networks"

// Selection is one validated element of the networks annotation: one attachment
// the pod asks for.
type Selection struct {
	// Name is the NetworkAttachmentDefinition name (4.1.2.1.1).
	Name string
	// Namespace is the NetworkAttachmentDefinition namespace: the pod's own when the
	// annotation leaves it out or empty (4.1.2.1.2).
	Namespace string
	// IPs are the requested addresses as given, each an address with an optional
	// prefix length (4.1.2.1.3).
	IPs []string
	// MAC is the requested hardware address (4.1.2.1.4): 6-byte Ethernet or 20-byte
	// IP-over-InfiniBand, in lower-case colon form.
	MAC string
	// InfinibandGUID is the requested 8-byte InfiniBand GUID (v1.2 key
	// "infiniband-guid"), in lower-case colon form.
	InfinibandGUID string
	// Interface is the requested interface name in the pod (4.1.2.1.5).
	Interface string
	// CNIArgs is passed to the delegate's "args" (4.1.2.1.6).
	CNIArgs map[string]json.RawMessage
	// PortMappings are the requested port mappings (4.1.2.1.7), with Protocol in the
	// spec's upper-case form and defaulted to "TCP".
	PortMappings []PortMapping
	// Bandwidth is the requested traffic shaping (4.1.2.1.8), as given.
	Bandwidth *Bandwidth
	// DefaultRoute lists the gateways of the default route (4.1.2.1.9); it may be
	// empty even when HasDefaultRoute is set.
	DefaultRoute []string
	// HasDefaultRoute reports that the element carried "default-route": this
	// attachment gets the pod's default route, even with no gateway listed.
	HasDefaultRoute bool
}

// PortMapping is one "portMappings" entry (4.1.2.1.7), also the runtimeConfig
// "portMappings" entry of CNI's CONVENTIONS.md.
type PortMapping struct {
	HostPort      int    `json:"hostPort"`
	ContainerPort int    `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// Bandwidth is the "bandwidth" value (4.1.2.1.8), also the runtimeConfig
// "bandwidth" of CNI's CONVENTIONS.md. Rates are bits per second, bursts bits;
// zero means not given.
type Bandwidth struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}

// Ref returns the "namespace/name" of the selected NetworkAttachmentDefinition.
func (s Selection) Ref() string {
	return s.Namespace + "/" + s.Name
}

// RuntimePortMappings returns the port mappings in CONVENTIONS.md form, whose
// examples and the portmap plugin use lower-case protocols; nil when there are none.
func (s Selection) RuntimePortMappings() []PortMapping {
	if len(s.PortMappings) == 0 {
		return nil
	}
	out := make([]PortMapping, len(s.PortMappings))
	for i, pm := range s.PortMappings {
		pm.Protocol = strings.ToLower(pm.Protocol)
		out[i] = pm
	}
	return out
}

// Burst defaults for Runtime. The reference bandwidth plugin refuses a rate
// without a burst, and the spec (4.1.2.1.8.2) leaves the default to us.
const (
	// defaultBurstDivisor makes the default burst what the rate carries in 100 ms:
	// enough for TCP to reach the rate, and small enough that the limit holds over
	// any longer interval. Kubernetes' choice, 2^31 bits, lets a pod send 256 MiB
	// at line rate before shaping starts, which makes low rates meaningless.
	defaultBurstDivisor = 10
	// minDefaultBurst is one 9216-byte jumbo frame: a token bucket smaller than a
	// packet cannot pass it.
	minDefaultBurst = 9216 * 8
	// maxDefaultBurst is the largest burst the bandwidth plugin accepts: it
	// refuses burst/8 >= 2^32-1 bytes.
	maxDefaultBurst = 8 * (math.MaxUint32 - 1)
)

// Runtime returns b as the runtimeConfig "bandwidth" value, with a burst filled
// in for each rate given without one: the traffic the rate carries in 100 ms,
// at least one jumbo frame and at most the bandwidth plugin's 4 GiB limit.
func (b Bandwidth) Runtime() Bandwidth {
	b.IngressBurst = defaultBurst(b.IngressRate, b.IngressBurst)
	b.EgressBurst = defaultBurst(b.EgressRate, b.EgressBurst)
	return b
}

func defaultBurst(rate, burst int64) int64 {
	if rate == 0 || burst != 0 {
		return burst
	}
	return min(max(rate/defaultBurstDivisor, minDefaultBurst), maxDefaultBurst)
}
