package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// Object is one of the two kinds, for FromUnstructured.
type Object interface {
	PodNetwork | PodNetworkAttachment
}

// FromUnstructured reads a dynamic client's or informer's object (an
// *unstructured.Unstructured) into T.
func FromUnstructured[T Object](obj any) (*T, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("not an unstructured object: %T", obj)
	}
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return &out, nil
}

// ToUnstructured is FromUnstructured's inverse, for writes.
func ToUnstructured[T Object](obj *T) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert to unstructured: %w", err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}
