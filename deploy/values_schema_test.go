package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// schemaRefusal is how Helm 3 (make helm's version) begins a refusal by
// values.schema.json; a template's own error reads otherwise.
const schemaRefusal = "values don't meet the specifications of the schema"

// valuesFile writes a values file for `helm template -f` in a fresh
// directory.
func valuesFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHelmValuesSchemaAccepts: every way the repo's tests and docs
// install the chart still renders under values.schema.json, and so do
// the Kubernetes fields the chart passes through as they are.
func TestHelmValuesSchemaAccepts(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"defaults", nil},
		// README.md's "Install on a cluster".
		{"README install", []string{"--set", "image.repository=REGISTRY/hwnet,image.tag=TAG", "--set-file", "pools=pools.yaml"}},
		// TestHelmChartRendersTheKustomizeBase, TestRBACPerFeature,
		// TestAllowedNamespacesAgentAndController.
		{"metrics and two namespaces", []string{"--set", "metrics.enabled=true", "--set", "metrics.pprof=true", "--set", "allowedNamespaces={default,net}"}},
		{"without DRA and controller", []string{"--set", "dra.enabled=false", "--set", "controller.enabled=false"}},
		{"own driver name", []string{"--set", "dra.driverName=net.example.com"}},
		// test/e2e's TestHelmRollingUpgrade.
		{"e2e rolling upgrade", []string{"--set", "image.repository=hwnet", "--set", "image.tag=next", "--set", "metrics.enabled=true",
			"--set", "metrics.port=8142", "--set-file", "pools=pools.yaml", "--set", "controller.enabled=false"}},
		// docs/security.md's VFSettingsPolicy, as the chart's value.
		{"security.md rules", []string{"-f", valuesFile(t, `
vfSettingsPolicy:
  rules:
  - name: team-a
    namespaces: [team-a]
    allow:
      vlans: [{min: 100, max: 199}]
      maxTxRateMbps: 10000
  - name: lab
    namespaceSelector:
      matchLabels: {hwnet.io/tenant: lab}
    allow: {trust: true, spoofchkOff: true}
`)}},
		// The Kubernetes fields take what Kubernetes takes, not only what
		// the defaults show.
		{"Kubernetes fields", []string{"-f", valuesFile(t, `
tolerations:
  - {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
  - {key: dedicated, operator: Equal, value: sriov, effect: NoSchedule}
nodeSelector: {kubernetes.io/os: linux, feature.node.kubernetes.io/network-sriov.capable: "true"}
resources:
  requests: {cpu: 0.05, memory: 64Mi, hugepages-2Mi: 128Mi}
  limits: {memory: 1Gi}
priorityClassName: ""
updateStrategy: {maxUnavailable: 10%}
dra:
  deviceClasses:
    - {name: hwnet-sriov-netdevice, pool: intel.com/sriov_netdevice}
    - {name: hwnet, pool: ""}
`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if objs := objects(t, command(t, helm, templateArgs(tc.args...)...)); objs["DaemonSet/hwnet-agent"] == nil {
				t.Fatalf("helm template %v rendered no DaemonSet/hwnet-agent", tc.args)
			}
		})
	}
	// Helm gives a subchart the key global, whether its parent sets
	// globals or not.
	t.Run("as a subchart", func(t *testing.T) {
		chart, err := filepath.Abs("helm/hwnet")
		if err != nil {
			t.Fatal(err)
		}
		parent := t.TempDir()
		for name, content := range map[string]string{
			"Chart.yaml":  "apiVersion: v2\nname: parent\nversion: 0.1.0\n",
			"values.yaml": "global: {imageRegistry: registry.example.com}\nhwnet:\n  metrics: {enabled: true}\n",
		} {
			if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Mkdir(filepath.Join(parent, "charts"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(chart, filepath.Join(parent, "charts", "hwnet")); err != nil {
			t.Fatal(err)
		}
		objs := objects(t, command(t, helm, "template", "parent", parent, "--namespace", "kube-system"))
		if args := agentArgs(t, objs); !slices.Contains(args, "--metrics-addr=:8142") {
			t.Fatalf("hwnet-agent's args %v under the parent chart: want its value metrics.enabled, --metrics-addr=:8142", args)
		}
	})
	command(t, helm, "lint", "--strict", "helm/hwnet")
}

// TestHelmValuesSchemaRefuses: a value of the wrong type, or a key the
// chart does not have (a typo), fails the render and the error names it,
// where without the schema the chart would render it silently: a string
// where a bool is tested is true, a misspelled key is ignored.
func TestHelmValuesSchemaRefuses(t *testing.T) {
	helm := tool(t, "HWNET_HELM", "helm", defaultHelm)
	for _, tc := range []struct {
		name string
		args []string
		want []string // in Helm's error, each
	}{
		// Wrong types.
		{"string for bool", []string{"--set", "dra.enabled=yes"}, []string{"at '/dra/enabled'", "want boolean"}},
		{"string for integer", []string{"--set", "probePort=abc"}, []string{"at '/probePort'", "want integer"}},
		// --set reads 123 as a number, which "%s:%s" renders as %!s(int64=123).
		{"number for string", []string{"--set", "image.tag=123"}, []string{"at '/image/tag'", "want string"}},
		{"quoted integer in a file", []string{"-f", valuesFile(t, "controller:\n  replicas: \"2\"\n")}, []string{"at '/controller/replicas'", "want integer"}},
		{"string for list", []string{"-f", valuesFile(t, "allowedNamespaces: default\n")}, []string{"at '/allowedNamespaces'", "want array"}},
		{"not in enum", []string{"--set", "logFormat=xml"}, []string{"at '/logFormat'", "'json', 'text'"}},
		{"not a quantity", []string{"--set", "resources.limits.memory=lots"}, []string{"at '/resources/limits/memory'"}},
		// Unknown top-level keys.
		{"unknown top-level key", []string{"--set", "imagee.tag=v1"}, []string{"at ''", "additional properties 'imagee'"}},
		{"unknown top-level key in a file", []string{"-f", valuesFile(t, "nodeSelectors: {kubernetes.io/os: linux}\n")}, []string{"at ''", "additional properties 'nodeSelectors'"}},
		// Unknown nested keys.
		{"unknown nested key", []string{"--set", "metrics.enbled=true"}, []string{"at '/metrics'", "additional properties 'enbled'"}},
		{"unknown nested key in a file", []string{"-f", valuesFile(t, "controller:\n  replica: 3\n")}, []string{"at '/controller'", "additional properties 'replica'"}},
		{"unknown key of a device class", []string{"-f", valuesFile(t, "dra:\n  deviceClasses:\n    - {name: a, extendedResource: example.com/a}\n")},
			[]string{"at '/dra/deviceClasses/0'", "additional properties 'extendedResource'"}},
		// A rule's keys are the CRD's: a typo fails at render, before the
		// API server.
		{"unknown key of a policy rule", []string{"-f", valuesFile(t, "vfSettingsPolicy:\n  rules:\n    - {name: a, namespace: [a]}\n")},
			[]string{"at '/vfSettingsPolicy/rules/0'", "additional properties 'namespace'"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, stderr, err := run(helm, templateArgs(tc.args...)...)
			if err == nil {
				t.Fatalf("helm template %v rendered; want the schema to refuse it", tc.args)
			}
			if !strings.Contains(stderr, schemaRefusal) {
				t.Fatalf("helm template %v failed, but not by the schema:\n%s", tc.args, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("helm template %v: error lacks %q:\n%s", tc.args, w, stderr)
				}
			}
		})
	}
	// helm lint, and so install and upgrade, validate the same way.
	out, stderr, err := run(helm, "lint", "--strict", "helm/hwnet", "--set", "metrics.enbled=true")
	if err == nil || !strings.Contains(string(out), "additional properties 'enbled'") {
		t.Errorf("helm lint --set metrics.enbled=true: %v, want it refused naming enbled:\n%s%s", err, out, stderr)
	}
}

// TestHelmValuesSchemaRulesMatchCRD: vfSettingsPolicy.rules is the
// VFSettingsPolicy's spec.rules as it is, so its schema is the CRD's,
// closed where the CRD lists properties; a change to the CRD must reach
// the chart's schema, or the chart refuses a valid rule or lets a typo
// through to the API server.
func TestHelmValuesSchemaRulesMatchCRD(t *testing.T) {
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	data, err := os.ReadFile("crds/hwnet.io_vfsettingspolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("the CRD has %d versions; the chart renders v1alpha1 alone", len(crd.Spec.Versions))
	}
	want := dig(t, crd.Spec.Versions[0].Schema.OpenAPIV3Schema, "properties", "spec", "properties", "rules")

	var values map[string]any
	data, err = os.ReadFile("helm/hwnet/values.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	got := dig(t, values, "properties", "vfSettingsPolicy", "properties", "rules")

	if w, g := asJSONSchema(want), asJSONSchema(got); !reflect.DeepEqual(w, g) {
		wj, _ := json.MarshalIndent(w, "", "  ")
		gj, _ := json.MarshalIndent(g, "", "  ")
		t.Errorf("values.schema.json's vfSettingsPolicy.rules differs from the CRD's spec.rules:\nchart: %s\nCRD:   %s", gj, wj)
	}
}

func dig(t *testing.T, m map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, p := range path {
		next, ok := m[p].(map[string]any)
		if !ok {
			t.Fatalf("no %s in %v", strings.Join(path, "."), m)
		}
		m = next
	}
	return m
}

// asJSONSchema is an OpenAPI schema as values.schema.json says it: no
// descriptions, no Kubernetes extensions (CEL rules, list types: the API
// server checks those), and an object with properties closed.
func asJSONSchema(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			if k == "description" || strings.HasPrefix(k, "x-kubernetes-") {
				continue
			}
			if k == "properties" {
				props := map[string]any{}
				for name, p := range x.(map[string]any) {
					props[name] = asJSONSchema(p)
				}
				out[k] = props
				continue
			}
			out[k] = asJSONSchema(x)
		}
		if _, ok := v["properties"]; ok && v["additionalProperties"] == nil {
			out["additionalProperties"] = false
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = asJSONSchema(x)
		}
		return out
	}
	return v
}
