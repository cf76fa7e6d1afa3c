package delegate

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/cache"
)

// slowSink is an API server that never answers the network-status write
// within its timeout.
type slowSink struct{}

func (slowSink) SetNetworkStatus(ctx context.Context, _ cache.PodRef, _ map[string]string) error {
	<-ctx.Done()
	return ctx.Err()
}

func (slowSink) Event(cache.PodRef, string, string, string) {}

// TestStatusQueue_ClaimWriteOwnTimeout: a network-status write that used
// up its timeout leaves the claims' status write a whole timeout of its
// own, not a context already done.
func TestStatusQueue_ClaimWriteOwnTimeout(t *testing.T) {
	render := func([]attached) (map[string]string, string, error) { return map[string]string{}, "", nil }
	q := newStatusQueue(slowSink{}, render, 2*time.Second, slog.New(slog.DiscardHandler))
	got := make(chan error, 1)
	q.claims = func(ctx context.Context, _ publication) { got <- ctx.Err() }
	q.enqueue(cache.PodRef{Namespace: "ns", Name: "p", UID: "u"}, publication{})
	if err := <-got; err != nil {
		t.Errorf("the claims' status write started with its context done: %v", err)
	}
	if err := q.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
}
