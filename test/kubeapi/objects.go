package kubeapi

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

// ApplyCRD creates the CustomResourceDefinition in the YAML file at path
// (left as it is if one of that name exists) and waits until it is
// Established, its resource can be listed and creates of its objects are no
// longer delayed.
func (s *Server) ApplyCRD(t testing.TB, path string) {
	t.Helper()
	crd, err := readCRD(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.applyCRD(ctx, crd); err != nil {
		t.Fatal(err)
	}
}

func readCRD(path string) (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CRD: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		return nil, fmt.Errorf("parse CRD %s: %w", path, err)
	}
	if crd.Kind != "CustomResourceDefinition" || len(crd.Spec.Versions) == 0 {
		return nil, fmt.Errorf("parse CRD %s: kind %q with %d versions, want a CustomResourceDefinition with at least one version",
			path, crd.Kind, len(crd.Spec.Versions))
	}
	return &crd, nil
}

func (s *Server) applyCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	client, err := apiextensions.NewForConfig(s.config)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	_, err = client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	var establishedAt time.Time
	if err := waitFor(ctx, s.apiserver, func(ctx context.Context) error {
		establishedAt, err = crdEstablished(ctx, client, crd.Name)
		return err
	}); err != nil {
		return fmt.Errorf("CRD %s: %w", crd.Name, err)
	}
	if err := s.waitServed(ctx, crd); err != nil {
		return err
	}
	return sleepUntil(ctx, establishedAt.Add(createDelayAfterEstablished))
}

// createDelayAfterEstablished is how long after a CRD became Established
// kube-apiserver delays every create of its objects by 2 s (so that other
// API servers of an HA control plane see the CRD too). Waiting it out here
// keeps that delay out of the timings of the code under test. The second
// added covers Established's transition time being rounded down to seconds.
const createDelayAfterEstablished = 3 * time.Second

func sleepUntil(ctx context.Context, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("wait until %s: %w", deadline.Format(time.RFC3339), ctx.Err())
	case <-timer.C:
		return nil
	}
}

// crdEstablished returns when the CRD became Established, or an error
// while it is not.
func crdEstablished(ctx context.Context, client apiextensions.Interface, name string) (time.Time, error) {
	crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return time.Time{}, fmt.Errorf("get CRD: %w", err)
	}
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
			return cond.LastTransitionTime.Time, nil
		}
	}
	return time.Time{}, fmt.Errorf("CRD %s is not Established yet", name)
}

// waitServed waits until the CRD's resource can be listed: Established is
// set a moment before the handler for the new resource is installed.
func (s *Server) waitServed(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	client, err := dynamic.NewForConfig(s.config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	resource := schema.GroupVersionResource{
		Group:    crd.Spec.Group,
		Version:  crd.Spec.Versions[0].Name,
		Resource: crd.Spec.Names.Plural,
	}
	return waitFor(ctx, s.apiserver, func(ctx context.Context) error {
		_, err := client.Resource(resource).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("list %s: %w", resource, err)
		}
		return nil
	})
}

// CreateNamespace creates the namespace name.
func (s *Server) CreateNamespace(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := s.client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("kubeapi: create namespace %s: %v", name, err)
	}
}

// CreatePod creates a pod bound to node, as the scheduler would have, and
// returns it as created.
func (s *Server) CreatePod(t testing.TB, namespace, name, node string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/pause"}},
		},
	}
	created, err := s.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("kubeapi: create pod %s/%s: %v", namespace, name, err)
	}
	return created
}

// WaitFor polls cond until it holds, failing t after a minute: for what a
// test cannot be told of but can only look at.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
