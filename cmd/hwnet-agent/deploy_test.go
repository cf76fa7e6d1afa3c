package main

import (
	"io"
	"os"
	"path/filepath"
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
					Args         []string      `json:"args"`
					VolumeMounts []volumeMount `json:"volumeMounts"`
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

type volumeMount struct {
	MountPath string `json:"mountPath"`
	ReadOnly  bool   `json:"readOnly"`
}

// daemonSet reads the first DaemonSet of a manifest file.
func daemonSet(t *testing.T, file string) manifest {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		var m manifest
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if m.Kind == "DaemonSet" {
			return m
		}
	}
	t.Fatalf("%s has no DaemonSet", file)
	return manifest{}
}

// mountOf is the mount a path of the host is seen through, if any.
func mountOf(mounts []volumeMount, path string) (volumeMount, bool) {
	for _, m := range mounts {
		if path == m.MountPath || strings.HasPrefix(path, m.MountPath+"/") {
			return m, true
		}
	}
	return volumeMount{}, false
}

// TestDeployMountsWhatTheAgentReads: the agent's and the uninstall's
// DaemonSets mount every source of the device ledger at the path their
// arguments give it (kubelet's PodResources, the device-info files, every
// hwnet DRA checkpoint, the CNI records), and the agent its fences
// read-write: a source not mounted would read as holding nothing. The
// uninstall mounts the CDI specs it removes.
func TestDeployMountsWhatTheAgentReads(t *testing.T) {
	for _, tc := range []struct {
		file  string
		paths func(command) []string
		// fences: the DaemonSet writes its fences.
		fences bool
	}{
		{"../../deploy/hwnet-agent.yaml", func(c command) []string {
			o := c.opts
			return []string{o.PodResourcesSocket, o.DevinfoDir, o.DRAPluginsDir, o.FenceDir, o.CNI.CacheDir}
		}, true},
		{"../../deploy/uninstall/hwnet-uninstall.yaml", func(c command) []string {
			u := uninstallOptions(c.opts)
			return []string{u.PodResourcesSocket, u.DevinfoDir, u.DRAPluginsDir, u.FenceDir, u.CNI.CacheDir, u.CDIDir}
		}, false},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			container := daemonSet(t, tc.file).Spec.Template.Spec.Containers[0]
			c, err := parseFlags(container.Args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range tc.paths(c) {
				if _, ok := mountOf(container.VolumeMounts, p); !ok {
					t.Errorf("%s is not mounted", p)
				}
			}
			if tc.fences {
				if m, _ := mountOf(container.VolumeMounts, c.opts.FenceDir); m.ReadOnly {
					t.Errorf("the fence directory %s is mounted read-only (%s)", c.opts.FenceDir, m.MountPath)
				}
			}
		})
	}
}
