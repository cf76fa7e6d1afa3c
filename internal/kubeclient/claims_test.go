package kubeclient_test

import (
	"context"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// TestWithKubeletPacedClaims: the DRA driver's claim reads, one per
// NodePrepareResources, wait for no client-side limit; its other
// requests (the ResourceSlices) still do. Both reach the API server.
func TestWithKubeletPacedClaims(t *testing.T) {
	s := kubeapi.Start(t)
	limiter := &countingLimiter{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
	cfg := s.Config()
	cfg.RateLimiter = limiter
	client := kubernetes.NewForConfigOrDie(cfg)
	paced, err := kubeclient.WithKubeletPacedClaims(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for range 20 {
		_, err := paced.ResourceV1().ResourceClaims("default").Get(ctx, "absent", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("claim read: %v, want not found from the API server", err)
		}
	}
	if n := limiter.waits.Load(); n != 0 {
		t.Errorf("20 claim reads waited for the client's rate limit %d times, want 0", n)
	}
	if _, err := paced.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := limiter.waits.Load(); n != 1 {
		t.Errorf("a slice list waited for the client's rate limit %d times, want 1", n)
	}
}

// TestPacedClaimGet: the claim read with no options, made as a bare
// request, is the claim the generated client reads, allocation and
// all; a read with options goes through the generated client.
func TestPacedClaimGet(t *testing.T) {
	s := kubeapi.Start(t)
	s.CreateNamespace(t, "ns")
	want := s.AllocatedClaim(t, kubeapi.Allocation{Namespace: "ns", Name: "claim", Class: "vfs", Driver: "sriov.hwnet.io",
		Pool: "node-a", Devices: []string{"pci-0000-3b-02-0", "pci-0000-3b-02-1"}})
	client := kubernetes.NewForConfigOrDie(s.Config())
	paced, err := kubeclient.WithKubeletPacedClaims(client, s.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, opts := range []metav1.GetOptions{{}, {ResourceVersion: "0"}} {
		got, err := paced.ResourceV1().ResourceClaims("ns").Get(ctx, "claim", opts)
		if err != nil {
			t.Fatalf("read with %+v: %v", opts, err)
		}
		// The API server fills the kind in neither answer.
		got.TypeMeta, want.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
		if !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("read with %+v:\n%+v\nwant the claim as allocated:\n%+v", opts, got, want)
		}
	}
}

// countingLimiter counts the requests that wait for it.
type countingLimiter struct {
	flowcontrol.RateLimiter
	waits atomic.Int32
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.waits.Add(1)
	return l.RateLimiter.Wait(ctx)
}
