package kubeclient

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	resourcev1 "k8s.io/client-go/kubernetes/typed/resource/v1"
	"k8s.io/client-go/rest"
)

// WithKubeletPacedClaims is client but for ResourceClaims, which go
// through a client of cfg without a client-side rate limit. A DRA
// driver reads a claim for each NodePrepareResources kubelet makes, so
// kubelet paces those reads; behind client's limit (50 a second, bursts
// of 100) a node preparing claims back to back waited 20 ms a read once
// the burst was spent. The API server's priority and fairness still
// governs them. Every other request, the ResourceSlice updates among
// them, keeps client's limit.
func WithKubeletPacedClaims(client kubernetes.Interface, cfg *rest.Config) (kubernetes.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.RateLimiter = -1, nil
	claims, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("API server client for claims: %w", err)
	}
	return kubeletPaced{Interface: client, claims: claims.ResourceV1()}, nil
}

type kubeletPaced struct {
	kubernetes.Interface
	claims resourcev1.ResourceV1Interface
}

func (c kubeletPaced) ResourceV1() resourcev1.ResourceV1Interface {
	return pacedResourceV1{ResourceV1Interface: c.Interface.ResourceV1(), claims: c.claims}
}

type pacedResourceV1 struct {
	resourcev1.ResourceV1Interface
	claims resourcev1.ResourceV1Interface
}

func (r pacedResourceV1) ResourceClaims(namespace string) resourcev1.ResourceClaimInterface {
	return claimsIn{ResourceClaimInterface: r.claims.ResourceClaims(namespace), rest: r.claims.RESTClient(), namespace: namespace}
}

// claimsIn are a namespace's claims, whose Get of the latest claim (no
// options: the DRA library's read) is a bare request. The generated
// client encodes the empty options into query parameters by reflection
// first: 67 µs of CPU per NodePrepareResources in a profile of dra's
// BenchmarkNodePrepare (2 vCPU AMD EPYC), where the driver's whole
// prepare takes 217 µs (BenchmarkPrepare, p50).
type claimsIn struct {
	resourcev1.ResourceClaimInterface
	rest      rest.Interface
	namespace string
}

func (c claimsIn) Get(ctx context.Context, name string, opts metav1.GetOptions) (*resourceapi.ResourceClaim, error) {
	if opts != (metav1.GetOptions{}) {
		return c.ResourceClaimInterface.Get(ctx, name, opts)
	}
	claim := &resourceapi.ResourceClaim{}
	err := c.rest.Get().UseProtobufAsDefaultIfPreferred(true).Namespace(c.namespace).Resource("resourceclaims").Name(name).
		Do(ctx).Into(claim)
	return claim, err
}
