package kubeapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// ApplyFile creates every object of the multi-document YAML file at path,
// in file order, resolving each kind through the server's discovery.
func (s *Server) ApplyFile(t testing.TB, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := DecodeObjects(data)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.create(ctx, objs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// ApplyObjects creates objs, in order, as ApplyFile does the objects of a
// file (what `kustomize build` or `helm template` rendered).
func (s *Server) ApplyObjects(t testing.TB, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.create(ctx, objs); err != nil {
		t.Fatal(err)
	}
}

// DecodeObjects decodes a multi-document YAML or JSON stream, skipping
// empty documents.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var obj map[string]any
		err := dec.Decode(&obj)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("decode object %d: %w", len(out)+1, err)
		}
		if obj != nil {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}

func (s *Server) create(ctx context.Context, objs []*unstructured.Unstructured) error {
	dc, err := discovery.NewDiscoveryClientForConfig(s.config)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	client, err := dynamic.NewForConfig(s.config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		// kustomize's namespace: also lands on kinds it does not know to be
		// cluster-scoped (ValidatingAdmissionPolicies, DeviceClasses),
		// which have no namespace.
		if m.Scope.Name() == meta.RESTScopeNameRoot && obj.GetNamespace() != "" {
			obj = obj.DeepCopy()
			obj.SetNamespace("")
		}
		_, err = client.Resource(m.Resource).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldValidation: "Strict"})
		if err != nil {
			return fmt.Errorf("create %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}
