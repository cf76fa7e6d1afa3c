// Package deploy_test checks the install paths of deploy/: the kustomize
// base and the Helm chart render the same objects, the chart lints, and
// the real kube-apiserver accepts every object in a server-side dry run.
package deploy_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

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
	out, stderr, err := run(bin, args...)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, stderr)
	}
	return out
}

// run is command for a test that expects the command to fail: its
// stderr says why.
func run(bin string, args ...string) (stdout []byte, stderr string, err error) {
	var errBuf bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &errBuf
	stdout, err = cmd.Output()
	return stdout, errBuf.String(), err
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

// templateArgs are helm's arguments to render the chart as installed in
// kube-system, with extra ones (--set, -f, --set-file) after.
func templateArgs(extra ...string) []string {
	return append([]string{"template", "hwnet", "helm/hwnet", "--namespace", "kube-system"}, extra...)
}

func helmTemplate(t *testing.T, helm string, set ...string) map[string]*unstructured.Unstructured {
	args := templateArgs("--include-crds")
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
	// A custom resource (the VFSettingsPolicy hwnet) needs its CRD served,
	// which a dry run of the CRD does not do: the CRD is created for real
	// (validated all the same) and left out of the dry runs.
	api.ApplyCRD(t, "crds/hwnet.io_vfsettingspolicies.yaml")
	withMetrics := helmTemplate(t, helm, "metrics.enabled=true", "metrics.pprof=true", "allowedNamespaces={default,net}")
	withoutDRA := helmTemplate(t, helm, "dra.enabled=false", "controller.enabled=false")
	uninstall, err := os.ReadFile("uninstall/hwnet-uninstall.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for name, set := range map[string]map[string]*unstructured.Unstructured{"kustomize base": base, "chart with metrics": withMetrics,
		"chart without DRA and controller": withoutDRA,
		"uninstall":                        objects(t, uninstall)} {
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
		if key == "CustomResourceDefinition/vfsettingspolicies.hwnet.io" {
			continue
		}
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

// agentRules are the rules of every ClusterRole bound to hwnet-agent's
// service account.
func agentRules(t *testing.T, objs map[string]*unstructured.Unstructured) []map[string]any {
	t.Helper()
	var rules []map[string]any
	for _, b := range objs {
		if b.GetKind() != "ClusterRoleBinding" {
			continue
		}
		subjects, _, _ := unstructured.NestedSlice(b.Object, "subjects")
		bound := false
		for _, s := range subjects {
			if s, ok := s.(map[string]any); ok && s["kind"] == "ServiceAccount" && s["name"] == "hwnet-agent" {
				bound = true
			}
		}
		role, _, _ := unstructured.NestedString(b.Object, "roleRef", "name")
		if !bound || objs["ClusterRole/"+role] == nil {
			continue
		}
		list, _, _ := unstructured.NestedSlice(objs["ClusterRole/"+role].Object, "rules")
		for _, r := range list {
			rules = append(rules, r.(map[string]any))
		}
	}
	return rules
}

// grants says whether any rule grants verb on resource in group.
func grants(rules []map[string]any, group, resource, verb string) bool {
	has := func(r map[string]any, key, want string) bool {
		list, _ := r[key].([]any)
		for _, v := range list {
			if v == want || v == "*" {
				return true
			}
		}
		return false
	}
	for _, r := range rules {
		if has(r, "apiGroups", group) && has(r, "resources", resource) && has(r, "verbs", verb) {
			return true
		}
	}
	return false
}

// agentArgs are the hwnet-agent container's arguments.
func agentArgs(t *testing.T, objs map[string]*unstructured.Unstructured) []string {
	t.Helper()
	return containerArgs(t, objs, "DaemonSet/hwnet-agent")
}

// containerArgs are the arguments of the first container of the workload
// at key (kind/name).
func containerArgs(t *testing.T, objs map[string]*unstructured.Unstructured, key string) []string {
	t.Helper()
	w := objs[key]
	if w == nil {
		t.Fatalf("no %s", key)
	}
	containers, _, _ := unstructured.NestedSlice(w.Object, "spec", "template", "spec", "containers")
	var args []string
	for _, a := range containers[0].(map[string]any)["args"].([]any) {
		args = append(args, a.(string))
	}
	return args
}

// TestRBACPerFeature: the agent holds the DRA driver's permissions, its
// ResourceSlice and claim status policies and --dra together or not at all (Helm's
// dra.enabled; kustomize's dra component), the controller's policies come
// with the controller, and the policies name the driver the chart
// configures.
func TestRBACPerFeature(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	for _, tc := range []struct {
		name       string
		set        []string
		dra        bool
		driver     string
		controller bool
	}{
		{name: "defaults", dra: true, driver: "hwnet.io", controller: true},
		{name: "without DRA", set: []string{"dra.enabled=false"}, controller: true},
		{name: "own driver name", set: []string{"dra.driverName=net.example.com"}, dra: true, driver: "net.example.com", controller: true},
		{name: "without controller", set: []string{"controller.enabled=false"}, dra: true, driver: "hwnet.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := helmTemplate(t, helm, tc.set...)
			rules := agentRules(t, objs)
			for _, verb := range []string{"create", "update", "delete", "patch", "deletecollection"} {
				want := tc.dra && verb != "patch" && verb != "deletecollection"
				if got := grants(rules, "resource.k8s.io", "resourceslices", verb); got != want {
					t.Errorf("the agent may %s ResourceSlices: %v, want %v", verb, got, want)
				}
			}
			for _, r := range []string{"resourceclaims", "resourceclaims/status", "resourceclaims/driver"} {
				for _, verb := range []string{"get", "patch", "associated-node:patch"} {
					if grants(rules, "resource.k8s.io", r, verb) && !tc.dra {
						t.Errorf("without DRA the agent may %s %s", verb, r)
					}
				}
			}
			if got := grants(rules, "", "nodes", "get"); got != tc.dra {
				t.Errorf("the agent may get Nodes: %v, want %v (the DRA driver's slice owner)", got, tc.dra)
			}
			if grants(rules, "events.k8s.io", "events", "create") || grants(rules, "", "events", "update") {
				t.Error("the agent may write events.k8s.io Events or update Events; its recorder creates and patches core Events")
			}
			if got := slices.Contains(agentArgs(t, objs), "--dra"); got != tc.dra {
				t.Errorf("agent args have --dra: %v, want %v", got, tc.dra)
			}
			// The slice, claim status and claims' VF settings policies come
			// with the driver and name it.
			for _, name := range []string{"hwnet-agent-own-node-slices", "hwnet-agent-own-node-claim-status", "hwnet-vf-settings-claims"} {
				policy := objs["ValidatingAdmissionPolicy/"+name]
				if (policy != nil) != tc.dra {
					t.Errorf("policy %s rendered: %v, want %v", name, policy != nil, tc.dra)
				}
				if policy != nil && !hasVariable(policy, "driver", "'"+tc.driver+"'") {
					t.Errorf("policy %s: want variable driver '%s'", name, tc.driver)
				}
			}
			for _, name := range []string{"hwnet-controller-pod-gate", "hwnet-controller-podnetworks"} {
				if got := objs["ValidatingAdmissionPolicy/"+name] != nil && objs["ValidatingAdmissionPolicyBinding/"+name] != nil; got != tc.controller {
					t.Errorf("policy %s rendered: %v, want %v", name, got, tc.controller)
				}
			}
			for _, name := range []string{"hwnet-agent-own-node-pods", "hwnet-agent-own-node-events", "hwnet-vf-settings-nads"} {
				if objs["ValidatingAdmissionPolicyBinding/"+name] == nil {
					t.Errorf("policy %s not rendered", name)
				}
			}
		})
	}
}

// hasVariable says whether the policy has the variable name with expression.
func hasVariable(policy *unstructured.Unstructured, name, expression string) bool {
	vars, _, _ := unstructured.NestedSlice(policy.Object, "spec", "variables")
	for _, v := range vars {
		if v, ok := v.(map[string]any); ok && v["name"] == name && v["expression"] == expression {
			return true
		}
	}
	return false
}

// TestKustomizeDRAComponent: deploy/'s resources without the dra
// component grant the agent nothing of resource.k8s.io and do not turn the
// driver on; the component brings both, with the slice policy.
func TestKustomizeDRAComponent(t *testing.T) {
	kubectl := tool(t, "HWNET_KUBECTL", "kubectl", filepath.Join(kubeapi.Binaries(t), "kubectl"))
	var base struct {
		Resources  []string `json:"resources"`
		Components []string `json:"components"`
	}
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &base); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(base.Components, []string{"dra"}) {
		t.Fatalf("deploy/kustomization.yaml components %v, want [dra]", base.Components)
	}
	without := map[string]*unstructured.Unstructured{}
	for _, f := range base.Resources {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(without, objects(t, data))
	}
	for key, obj := range without {
		if obj.GetKind() != "ClusterRole" && obj.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
		for _, r := range rules {
			groups, _ := r.(map[string]any)["apiGroups"].([]any)
			if slices.Contains(groups, any("resource.k8s.io")) {
				t.Errorf("%s outside the dra component grants %v", key, r)
			}
		}
	}
	if slices.Contains(agentArgs(t, without), "--dra") {
		t.Error("hwnet-agent.yaml turns DRA on by itself; the dra component should")
	}
	with := objects(t, command(t, kubectl, "kustomize", "."))
	if !grants(agentRules(t, with), "resource.k8s.io", "resourceslices", "create") || !slices.Contains(agentArgs(t, with), "--dra") ||
		with["ValidatingAdmissionPolicy/hwnet-agent-own-node-slices"] == nil || with["ValidatingAdmissionPolicy/hwnet-agent-own-node-claim-status"] == nil {
		t.Error("deploy/ with its dra component: want the slice RBAC, --dra and the slice and claim status policies")
	}
}

// TestAllowedNamespacesAgentAndController: hwnet-controller judges a
// PodNetworkAttachment's parameters by the agents' --cni-allowed-namespaces,
// so both get the same value from either install.
func TestAllowedNamespacesAgentAndController(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	kubectl := tool(t, "HWNET_KUBECTL", "kubectl", filepath.Join(kubeapi.Binaries(t), "kubectl"))
	for name, tc := range map[string]struct {
		objs map[string]*unstructured.Unstructured
		want string
	}{
		"kustomize base": {objects(t, command(t, kubectl, "kustomize", ".")), "default"},
		"chart":          {helmTemplate(t, helm), "default"},
		"chart with two": {helmTemplate(t, helm, "allowedNamespaces={default,net}"), "default,net"},
	} {
		want := "--cni-allowed-namespaces=" + tc.want
		for _, key := range []string{"DaemonSet/hwnet-agent", "Deployment/hwnet-controller"} {
			if args := containerArgs(t, tc.objs, key); !slices.Contains(args, want) {
				t.Errorf("%s: %s args %v, want %s", name, key, args, want)
			}
		}
	}
}

// agentMounts are the hwnet-agent container's volume mounts by path, each
// true when read-only.
func agentMounts(t *testing.T, objs map[string]*unstructured.Unstructured) map[string]bool {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(objs["DaemonSet/hwnet-agent"].Object, "spec", "template", "spec", "containers")
	mounts, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "volumeMounts")
	out := map[string]bool{}
	for _, m := range mounts {
		m := m.(map[string]any)
		ro, _ := m["readOnly"].(bool)
		out[m["mountPath"].(string)] = ro
	}
	return out
}

// TestAgentMountsLedgerSources: with DRA on or off, the agent sees
// kubelet's DRA plugins directory, where every hwnet checkpoint holds its
// claims' devices (read-only is enough without the driver), and writes
// its fences under /var/lib/hwnet.
func TestAgentMountsLedgerSources(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	for _, tc := range []struct {
		name string
		objs map[string]*unstructured.Unstructured
		dra  bool
	}{
		{"chart", helmTemplate(t, helm), true},
		{"chart without DRA", helmTemplate(t, helm, "dra.enabled=false"), false},
	} {
		mounts := agentMounts(t, tc.objs)
		if ro, ok := mounts["/var/lib/kubelet/plugins"]; !ok || ro == tc.dra {
			t.Errorf("%s: /var/lib/kubelet/plugins mounted %t, read-only %t; want mounted, read-only %t", tc.name, ok, ro, !tc.dra)
		}
		if ro, ok := mounts["/var/lib/hwnet"]; !ok || ro {
			t.Errorf("%s: /var/lib/hwnet (the fences) mounted %t, read-only %t; want read-write", tc.name, ok, ro)
		}
	}
}
