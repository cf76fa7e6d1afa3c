package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/pools"
)

// manifest is what the test reads of deploy/hwnet-agent.yaml's documents.
type manifest struct {
	Kind string            `json:"kind"`
	Data map[string]string `json:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []struct {
					Args []string `json:"args"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
}

// TestDeployManifests: the shipped pool configs load, and the DaemonSet's
// arguments are flags the agent accepts.
func TestDeployManifests(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := pools.ReadChecked("../../deploy/pools.yaml", db); err != nil {
		t.Errorf("deploy/pools.yaml: %v", err)
	}
	data, err := os.ReadFile("../../deploy/hwnet-agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("deploy/hwnet-agent.yaml: %v", err)
		}
		kinds[m.Kind] = true
		checkDocument(t, m)
	}
	if !kinds["ConfigMap"] || !kinds["DaemonSet"] {
		t.Errorf("deploy/hwnet-agent.yaml has %v, want a ConfigMap and a DaemonSet", kinds)
	}
}

func checkDocument(t *testing.T, m manifest) {
	t.Helper()
	switch m.Kind {
	case "ConfigMap":
		if _, err := pools.Parse([]byte(m.Data["config.yaml"])); err != nil {
			t.Errorf("ConfigMap config.yaml: %v", err)
		}
	case "DaemonSet":
		for _, c := range m.Spec.Template.Spec.Containers {
			if _, err := parseFlags(c.Args, io.Discard); err != nil {
				t.Errorf("DaemonSet args %v: %v", c.Args, err)
			}
		}
	}
}
