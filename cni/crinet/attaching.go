package crinet

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/hwnet-io/hwnet/cni/wire"
)

// Handler is a CNI request handler, as cni/server serves one.
type Handler interface {
	Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error)
}

// Attaching wraps the delegator so that a managed network a request
// resolves stays held until the request is done: Remove refuses a network
// an ADD is attaching pods to, from the moment the ADD looks it up, before
// the attachment record that then keeps it in use exists.
type Attaching struct {
	Next Handler
}

// Handle implements Handler.
func (a Attaching) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	h := &holds{}
	defer h.release()
	return a.Next.Handle(context.WithValue(ctx, holdsKey{}, h), req)
}

type holdsKey struct{}

// holds are the networks one request looked up.
type holds struct {
	mu    sync.Mutex
	store *Store
	keys  []Key
}

func holdsOf(ctx context.Context) *holds {
	h, _ := ctx.Value(holdsKey{}).(*holds)
	return h
}

func (h *holds) add(s *Store, k Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.store = s
	h.keys = append(h.keys, k)
}

func (h *holds) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range h.keys {
		h.store.unhold(k)
	}
	h.keys = nil
}
