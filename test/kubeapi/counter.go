package kubeapi

import (
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
)

// RequestCounter counts the requests a client sent, keyed "VERB resource"
// as Kubernetes' RBAC names them: "GET pods", "LIST pods", "WATCH pods",
// "PATCH pods/status", "POST events", "DELETECOLLECTION pods". Requests
// outside the resource API are keyed by path: "GET /readyz", "GET /apis".
type RequestCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// CountRequests returns a copy of cfg whose transport counts every request
// it sends into the returned counter, whatever the answer.
func CountRequests(cfg *rest.Config) (*rest.Config, *RequestCounter) {
	counter := &RequestCounter{counts: map[string]int{}}
	counted := rest.CopyConfig(cfg)
	counted.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &countingTransport{next: next, counter: counter}
	})
	return counted, counter
}

// Snapshot returns the counts so far.
func (c *RequestCounter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// Reset sets every count back to zero.
func (c *RequestCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

func (c *RequestCounter) add(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[key]++
}

type countingTransport struct {
	next    http.RoundTripper
	counter *RequestCounter
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.counter.add(requestKey(req.Method, req.URL))
	return t.next.RoundTrip(req)
}

// namespaceSubresources are the subresources of a namespace object, which
// share the path shape /api/v1/namespaces/NAME/X with namespaced collections.
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// requestKey derives "VERB resource" from a Kubernetes API request.
func requestKey(method string, u *url.URL) string {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var resourcePath []string
	switch {
	case len(parts) > 2 && parts[0] == "api":
		resourcePath = parts[2:] // /api/VERSION/...
	case len(parts) > 3 && parts[0] == "apis":
		resourcePath = parts[3:] // /apis/GROUP/VERSION/...
	default:
		return method + " /" + strings.Join(parts, "/")
	}
	watch := u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1"
	if resourcePath[0] == "watch" { // the deprecated /watch/ path prefix
		watch, resourcePath = true, resourcePath[1:]
	}
	if len(resourcePath) > 2 && resourcePath[0] == "namespaces" && !namespaceSubresources[resourcePath[2]] {
		resourcePath = resourcePath[2:] // namespaces/NS/RESOURCE...
	}
	if len(resourcePath) == 0 || resourcePath[0] == "" {
		return method + " " + u.Path
	}
	resource := resourcePath[0]
	if len(resourcePath) > 2 {
		resource += "/" + strings.Join(resourcePath[2:], "/")
	}
	return verb(method, watch, len(resourcePath) > 1) + " " + resource
}

// verb maps an HTTP method to the Kubernetes verb, which tells a read of
// one object (GET) from a read of a collection (LIST) or a watch.
func verb(method string, watch, named bool) string {
	switch {
	case method == http.MethodGet && watch:
		return "WATCH"
	case method == http.MethodGet && !named:
		return "LIST"
	case method == http.MethodDelete && !named:
		return "DELETECOLLECTION"
	default:
		return method
	}
}
