// Package deploy_test checks the install paths of deploy/: the kustomize
// base and the Helm chart render the same objects, the chart lints, and
// the real kube-apiserver accepts every object in a server-side dry run.
package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// defaultHelm is where `make helm` installs Helm, built from the module proxy.
const defaultHelm = "/var/cache/hwnet-ci/tools/helm"

// tool finds a command: $env, then PATH, then fallback; it skips the test
// when none exists, unless the CI asks for every test to run.
func tool(t *testing.T, env, name, fallback string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if _, err := os.Stat(fallback); err == nil {
		return fallback
	}
	msg := name + " not found ($" + env + ", PATH, " + fallback + "); `make helm` builds Helm"
	if os.Getenv("HWNET_REQUIRE_ROOT") == "1" || os.Getenv("HWNET_REQUIRE_KUBE") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

func command(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, stderr.String())
	}
	return out
}

// objects decodes a multi-document YAML stream, by kind and name.
func objects(t *testing.T, data []byte) map[string]*unstructured.Unstructured {
	t.Helper()
	objs, err := kubeapi.DecodeObjects(data)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		out[u.GetKind()+"/"+u.GetName()] = u
	}
	return out
}

func helmTemplate(t *testing.T, helm string, set ...string) map[string]*unstructured.Unstructured {
	args := []string{"template", "hwnet", "helm/hwnet", "--namespace", "kube-system", "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	return objects(t, command(t, helm, args...))
}

// TestHelmChartRendersTheKustomizeBase: whichever way an operator
// installs, the cluster gets the same objects; and both pass the real
// API server's validation and admission (a server-side dry run).
func TestHelmChartRendersTheKustomizeBase(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	kubectl := tool(t, "HWNET_KUBECTL", "kubectl", filepath.Join(kubeapi.Binaries(t), "kubectl"))
	base := objects(t, command(t, kubectl, "kustomize", "."))
	chart := helmTemplate(t, helm)
	if len(base) < 6 {
		t.Fatalf("the kustomize base renders %d objects, want the CRD, RBAC, ConfigMap and DaemonSet", len(base))
	}
	for key, want := range base {
		if got, ok := chart[key]; !ok {
			t.Errorf("the chart lacks %s", key)
		} else if !reflect.DeepEqual(got.Object, want.Object) {
			t.Errorf("the chart's %s differs from the kustomize base's:\nchart: %v\nbase:  %v", key, got.Object, want.Object)
		}
	}
	for key := range chart {
		if base[key] == nil {
			t.Errorf("the chart has %s, which the kustomize base lacks", key)
		}
	}
	command(t, helm, "lint", "--strict", "helm/hwnet")

	api := kubeapi.Start(t)
	withMetrics := helmTemplate(t, helm, "metrics.enabled=true", "metrics.pprof=true", "allowedNamespaces={default,net}")
	uninstall, err := os.ReadFile("uninstall/hwnet-uninstall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]map[string]*unstructured.Unstructured{"kustomize base": base, "chart with metrics": withMetrics,
		"uninstall": objects(t, uninstall)} {
		dryRun(t, api, name, set)
	}
}

// dryRun creates every object with dryRun=All: validated, defaulted and
// admitted by the API server, stored nowhere.
func dryRun(t *testing.T, api *kubeapi.Server, what string, objs map[string]*unstructured.Unstructured) {
	t.Helper()
	cfg := api.Config()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for key, obj := range objs {
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s %s: %v", what, key, err)
			continue
		}
		opts := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}
		_, err = client.Resource(m.Resource).Namespace(obj.GetNamespace()).Create(context.Background(), obj, opts)
		if err != nil {
			t.Errorf("%s %s: server-side dry run: %v", what, key, err)
		}
	}
}
