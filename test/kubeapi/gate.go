package kubeapi

import (
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// RequestGate holds the requests of a client that it matches, while it is
// closed, until it is opened: a test stands in for an API server that
// answers late (a slow list, a watch that has not seen a change yet).
type RequestGate struct {
	match func(key string) bool
	mu    sync.Mutex
	open  chan struct{} // nil while the gate is open
	held  int
}

// GateRequests returns a copy of cfg whose transport passes each request
// through the returned gate, open until Close. match is given the
// request's "VERB resource" key, as RequestCounter keys it ("LIST pods",
// "WATCH resourceslices").
func GateRequests(cfg *rest.Config, match func(key string) bool) (*rest.Config, *RequestGate) {
	g := &RequestGate{match: match}
	gated := rest.CopyConfig(cfg)
	gated.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return gateTransport{next: next, gate: g}
	})
	return gated, g
}

// Close has the gate hold the requests it matches from now on.
func (g *RequestGate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = make(chan struct{})
	}
}

// Open lets every held request and the requests after it through.
func (g *RequestGate) Open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
}

// Held is how many requests the gate has held.
func (g *RequestGate) Held() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}

// wait is the channel a matched request waits on, nil when it passes.
func (g *RequestGate) wait(key string) <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil || !g.match(key) {
		return nil
	}
	g.held++
	return g.open
}

type gateTransport struct {
	next http.RoundTripper
	gate *RequestGate
}

func (t gateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if open := t.gate.wait(requestKey(req.Method, req.URL)); open != nil {
		select {
		case <-open:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return t.next.RoundTrip(req)
}
