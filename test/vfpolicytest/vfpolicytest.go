// Package vfpolicytest installs a VFSettingsPolicy CRD in a test's
// kube-apiserver, writes the policy object and runs the agent's watcher
// on it, for the tests of the packages that enforce the policy.
package vfpolicytest

import (
	"context"
	_ "embed"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/cni/vfpolicywatch"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

//go:embed crd.yaml
var crd []byte

const timeout = 30 * time.Second

// InstallCRD creates the VFSettingsPolicy CRD and waits until it is served.
func InstallCRD(t testing.TB, s *kubeapi.Server) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "vfsettingspolicy-crd.yaml")
	if err := os.WriteFile(path, crd, 0o600); err != nil {
		t.Fatal(err)
	}
	s.ApplyCRD(t, path)
}

// Set creates or replaces the hwnet object with spec, a JSON object.
func Set(t testing.TB, s *kubeapi.Server, spec string) {
	t.Helper()
	var specObj map[string]any
	if err := json.Unmarshal([]byte(spec), &specObj); err != nil {
		t.Fatalf("policy spec %s: %v", spec, err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": vfpolicy.Group + "/" + vfpolicy.Version, "kind": vfpolicy.Kind,
		"metadata": map[string]any{"name": vfpolicy.Name}, "spec": specObj,
	}}
	res := dyn(t, s).Resource(vfpolicy.Resource)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	old, err := res.Get(ctx, vfpolicy.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = res.Create(ctx, obj, metav1.CreateOptions{})
	case err == nil:
		obj.SetResourceVersion(old.GetResourceVersion())
		_, err = res.Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("write VFSettingsPolicy %s: %v", vfpolicy.Name, err)
	}
}

// Delete deletes the hwnet object.
func Delete(t testing.TB, s *kubeapi.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := dyn(t, s).Resource(vfpolicy.Resource).Delete(ctx, vfpolicy.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete VFSettingsPolicy %s: %v", vfpolicy.Name, err)
	}
}

// Watch runs the agent's watcher against s until the test ends and
// waits until it has listed.
func Watch(t testing.TB, s *kubeapi.Server) *vfpolicywatch.Watcher {
	t.Helper()
	w := New(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("watcher: %v", err)
		}
	})
	WaitFor(t, "the watcher to list", func() bool { return w.HasSynced() })
	return w
}

// New is the agent's watcher on s, not running.
func New(t testing.TB, s *kubeapi.Server) *vfpolicywatch.Watcher {
	t.Helper()
	return vfpolicywatch.New(s.Client(), dyn(t, s), nil)
}

// WaitFor polls cond until it holds, failing the test after a while.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func dyn(t testing.TB, s *kubeapi.Server) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(s.Config())
	if err != nil {
		t.Fatal(err)
	}
	return d
}
