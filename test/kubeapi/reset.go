package kubeapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
)

// errKeepsState: the test made objects kube-apiserver also acts on from
// its own informers (RBAC's authorizer, admission policies and webhooks,
// service account token checks): deleting them takes effect at no moment
// the next test could wait for, so the server is not reused.
var errKeepsState = errors.New("kube-apiserver keeps state of what the test made")

// registry is where kube-apiserver keeps every object in etcd; registryEnd
// ends the range of keys that start with it.
const (
	registry    = "/registry/"
	registryEnd = "/registry0"
)

// keepsState reports whether kube-apiserver acts on objects under key
// through informers of its own.
func keepsState(key string) bool {
	return underAny(key, "clusterroles/", "clusterrolebindings/", "roles/", "rolebindings/",
		"validatingadmissionpolicies/", "validatingadmissionpolicybindings/", "mutatingadmissionpolicies/",
		"mutatingadmissionpolicybindings/", "validatingwebhookconfigurations/", "mutatingwebhookconfigurations/",
		"serviceaccounts/", "secrets/")
}

// kept reports whether a key no test removes: what kube-apiserver makes
// for itself, possibly after it is ready (the system namespaces, the
// kubernetes Service, its leases, API services, flow control), and
// CustomResourceDefinitions, which the next test of a package applies
// again as they are (ApplyCRD leaves one that exists alone).
func kept(key string) bool {
	return underAny(key, "namespaces/default", "namespaces/kube-system", "namespaces/kube-public",
		"namespaces/kube-node-lease", "services/specs/default/kubernetes", "services/endpoints/default/kubernetes",
		"endpointslices/default/kubernetes", "ranges/", "leases/kube-system/apiserver-", "priorityclasses/",
		"configmaps/kube-system/extension-apiserver-authentication",
		"configmaps/kube-system/kube-apiserver-legacy-service-account-token-tracking",
		"apiregistration.k8s.io/", "flowschemas/", "prioritylevelconfigurations/",
		"apiextensions.k8s.io/customresourcedefinitions/")
}

// underAny reports whether key is in the registry under one of prefixes.
func underAny(key string, prefixes ...string) bool {
	rest, ok := strings.CutPrefix(key, registry)
	return ok && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(rest, p) })
}

// reset deletes from etcd every object made since the server was ready,
// but the kept ones, and waits until kube-apiserver's caches no longer
// list them.
func (s *Server) reset(ctx context.Context) error {
	keys, err := s.etcdKeys(ctx)
	if err != nil {
		return err
	}
	var made []string
	for _, k := range keys {
		switch {
		case s.baseline[k] || kept(k):
		case keepsState(k):
			return fmt.Errorf("%w: %s", errKeepsState, k)
		default:
			made = append(made, k)
		}
	}
	for _, k := range made {
		if err := s.etcdCall(ctx, "deleterange", map[string]string{"key": base64.StdEncoding.EncodeToString([]byte(k))}, nil); err != nil {
			return err
		}
	}
	return s.waitCachesCurrent(ctx)
}

// etcdKeys lists every key under the registry, through etcd's JSON
// gateway (no etcd client in go.mod for it).
func (s *Server) etcdKeys(ctx context.Context) ([]string, error) {
	req := map[string]any{"key": base64.StdEncoding.EncodeToString([]byte(registry)),
		"range_end": base64.StdEncoding.EncodeToString([]byte(registryEnd)), "keys_only": true}
	var resp struct {
		Kvs []struct {
			Key []byte `json:"key"`
		} `json:"kvs"`
	}
	if err := s.etcdCall(ctx, "range", req, &resp); err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		keys = append(keys, string(kv.Key))
	}
	return keys, nil
}

func (s *Server) etcdCall(ctx context.Context, op string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.etcdURL+"/v3/kv/"+op, bytes.NewReader(data))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s", op, resp.Status)
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("etcd %s answer: %w", op, err)
	}
	return nil
}

// waitCachesCurrent lists every resource once with a consistent read,
// which kube-apiserver serves from its watch cache only once the cache
// has caught up with etcd: after it, no list or watch of the next test
// starts from objects the reset deleted.
func (s *Server) waitCachesCurrent(ctx context.Context) error {
	lists, err := s.client.Discovery().ServerPreferredResources()
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	client, err := metadata.NewForConfig(s.config)
	if err != nil {
		return err
	}
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			return err
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			if _, err := client.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{}); err != nil {
				return fmt.Errorf("list %s after the reset: %w", r.Name, err)
			}
		}
	}
	return nil
}
