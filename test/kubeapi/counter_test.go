package kubeapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestRequestKey(t *testing.T) {
	tests := []struct {
		name, method, url, want string
	}{
		{"get one pod", "GET", "/api/v1/namespaces/ns/pods/p1", "GET pods"},
		{"list pods in a namespace", "GET", "/api/v1/namespaces/ns/pods?limit=500", "LIST pods"},
		{"list pods in all namespaces", "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1", "LIST pods"},
		{"watch pods", "GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=10", "WATCH pods"},
		{"watch one pod by field selector", "GET", "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp1&watch=1", "WATCH pods"},
		{"deprecated watch path", "GET", "/api/v1/watch/namespaces/ns/pods/p1", "WATCH pods"},
		{"patch pod", "PATCH", "/api/v1/namespaces/ns/pods/p1", "PATCH pods"},
		{"patch pod status", "PATCH", "/api/v1/namespaces/ns/pods/p1/status", "PATCH pods/status"},
		{"post event", "POST", "/api/v1/namespaces/ns/events", "POST events"},
		{"post events.k8s.io event", "POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "POST events"},
		{"get NAD", "GET", "/apis/k8s.cni.cncf.io/v1/namespaces/ns/network-attachment-definitions/nad1", "GET network-attachment-definitions"},
		{"list NADs", "GET", "/apis/k8s.cni.cncf.io/v1/network-attachment-definitions", "LIST network-attachment-definitions"},
		{"get namespace", "GET", "/api/v1/namespaces/ns", "GET namespaces"},
		{"list namespaces", "GET", "/api/v1/namespaces", "LIST namespaces"},
		{"namespace status is not a collection", "PUT", "/api/v1/namespaces/ns/status", "PUT namespaces/status"},
		{"namespace finalize", "PUT", "/api/v1/namespaces/ns/finalize", "PUT namespaces/finalize"},
		{"cluster-scoped node", "GET", "/api/v1/nodes/n1", "GET nodes"},
		{"delete one", "DELETE", "/api/v1/namespaces/ns/pods/p1", "DELETE pods"},
		{"delete collection", "DELETE", "/api/v1/namespaces/ns/pods", "DELETECOLLECTION pods"},
		{"create CRD", "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "POST customresourcedefinitions"},
		{"readyz", "GET", "/readyz", "GET /readyz"},
		{"core discovery", "GET", "/api", "GET /api"},
		{"group discovery", "GET", "/apis/k8s.cni.cncf.io/v1", "GET /apis/k8s.cni.cncf.io/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, err := url.Parse(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if got := requestKey(tt.method, u); got != tt.want {
				t.Errorf("requestKey(%s %s) = %q, want %q", tt.method, tt.url, got, tt.want)
			}
		})
	}
}

func FuzzRequestKey(f *testing.F) {
	for _, seed := range []string{
		"/api/v1/namespaces/ns/pods/p1/status", "/apis/g/v/watch/namespaces/ns/x?watch=true",
		"/api/v1/watch", "/api/v1/namespaces//", "//", "", "/apis/a/b/namespaces/ns/status",
	} {
		f.Add(http.MethodGet, seed)
	}
	f.Fuzz(func(t *testing.T, method, rawURL string) {
		u, err := url.Parse(rawURL)
		if err != nil || strings.Contains(method, " ") {
			return
		}
		key := requestKey(method, u)
		verb, resource, ok := strings.Cut(key, " ")
		if !ok || resource == "" || (verb != method && verb != "LIST" && verb != "WATCH" && verb != "DELETECOLLECTION") {
			t.Errorf("requestKey(%q, %q) = %q, want \"VERB resource\"", method, rawURL, key)
		}
	})
}
