package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestAgentManifestCarriesPools: what DeployHwnet applies is
// deploy/hwnet-agent.yaml document for document, but the hwnet-pools
// ConfigMap, whose config.yaml is deploy/pools.yaml byte for byte.
func TestAgentManifestCarriesPools(t *testing.T) {
	repo, err := repoRoot()
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
		if doc != shippedDocs[i] {
			t.Errorf("document %d changed:\n%s\nwant as shipped:\n%s", i, doc, shippedDocs[i])
		}
	}
	if configMaps != 1 {
		t.Errorf("applied manifest has %d ConfigMaps %s, want 1", configMaps, poolsMap)
	}
}
