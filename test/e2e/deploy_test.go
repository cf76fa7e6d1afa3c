package e2e

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestAgentManifestCarriesPools: what DeployHwnet applies is
// deploy/hwnet-agent.yaml document for document, but the hwnet-pools
// ConfigMap, whose config.yaml is deploy/pools.yaml byte for byte, and the
// DaemonSet, whose agent the dra component turns the DRA driver on for.
func TestAgentManifestCarriesPools(t *testing.T) {
	repo, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	got, err := agentManifest(repo)
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := os.ReadFile(filepath.Join(repo, AgentFile))
	if err != nil {
		t.Fatal(err)
	}
	poolsConfig, err := os.ReadFile(filepath.Join(repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	gotDocs, shippedDocs := strings.Split(string(got), "\n---\n"), strings.Split(string(shipped), "\n---\n")
	if len(gotDocs) != len(shippedDocs) {
		t.Fatalf("applied manifest has %d documents, %s %d", len(gotDocs), AgentFile, len(shippedDocs))
	}
	configMaps := 0
	for i, doc := range gotDocs {
		var cm corev1.ConfigMap
		if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if cm.Kind == "ConfigMap" && cm.Name == poolsMap {
			configMaps++
			if cm.Namespace != AgentNamespace || cm.Data[poolsKey] != string(poolsConfig) {
				t.Errorf("ConfigMap %s/%s carries %q, want %s in %s", cm.Namespace, cm.Name, cm.Data[poolsKey], PoolsFile, AgentNamespace)
			}
			continue
		}
		if cm.Kind == "DaemonSet" {
			checkDRAPatched(t, doc, shippedDocs[i])
			continue
		}
		if doc != shippedDocs[i] {
			t.Errorf("document %d changed:\n%s\nwant as shipped:\n%s", i, doc, shippedDocs[i])
		}
	}
	if configMaps != 1 {
		t.Errorf("applied manifest has %d ConfigMaps %s, want 1", configMaps, poolsMap)
	}
}

// checkDRAPatched: the applied DaemonSet is the shipped one with --dra
// added to the agent's arguments.
func checkDRAPatched(t *testing.T, applied, shipped string) {
	t.Helper()
	var got, want appsv1.DaemonSet
	if err := yaml.Unmarshal([]byte(applied), &got); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(shipped), &want); err != nil {
		t.Fatal(err)
	}
	c := &want.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--dra")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("applied DaemonSet:\n%+v\nwant the shipped one with --dra:\n%+v", got, want)
	}
}
