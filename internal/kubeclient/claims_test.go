package kubeclient_test

import (
	"context"
	"sync/atomic"
	"testing"

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

// countingLimiter counts the requests that wait for it.
type countingLimiter struct {
	flowcontrol.RateLimiter
	waits atomic.Int32
}

func (l *countingLimiter) Wait(ctx context.Context) error {
	l.waits.Add(1)
	return l.RateLimiter.Wait(ctx)
}
