package ctl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

// serveNetworks serves the CRI network API on a real socket, as
// hwnet-agent does, and returns the socket.
func serveNetworks(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	store, err := crinet.OpenStore(filepath.Join(dir, "networks"), crinet.Validator{BinDirs: []string{cniplugins.Dir(t)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := crinet.NewServer(crinet.Options{Store: store, Records: attachments.NewStore(filepath.Join(dir, "cni"))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	socket := filepath.Join(dir, "cri-network.sock")
	go func() { done <- srv.Serve(ctx, socket) }()
	sockdir.Await(t, socket, done)
	t.Cleanup(func() { cancel(); <-done })
	return socket
}

const networkFile = `
metadata: {name: sriov-a, namespace: cnf, annotations: {k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_a}}
ip_ranges: [{cidr: 10.56.0.0/24}]
cniv1_config:
  cni_version: 1.1.0
  plugins:
    - type: hwnet-test-plugin
      capabilities: [ips]
      parameters: {personality: sriov, ipam: {type: static}}
`

func TestCRINet_Hwnetctl_SetListRemove(t *testing.T) {
	socket := serveNetworks(t)
	file := filepath.Join(t.TempDir(), "net.yaml")
	if err := os.WriteFile(file, []byte(networkFile), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "network", "set", "--socket", socket, "-f", file)
	if code != 0 || !strings.Contains(out, "network cnf/sriov-a set: generation 1") {
		t.Fatalf("set: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = run(t, "network", "list", "--socket", socket)
	if code != 0 || !strings.Contains(out, "cnf/sriov-a") || !strings.Contains(out, "_fallback") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = run(t, "network", "list", "--socket", socket, "-o", "json")
	var resp struct {
		Networks []struct {
			Config struct{ Metadata struct{ Name string } }
			Status struct{ SandboxManagement, Connectivity bool }
		}
	}
	if err := json.Unmarshal([]byte(out), &resp); code != 0 || err != nil || len(resp.Networks) != 2 ||
		resp.Networks[1].Config.Metadata.Name != "sriov-a" || !resp.Networks[1].Status.Connectivity {
		t.Fatalf("list -o json: exit %d, %v\n%s", code, err, out)
	}
	code, out, errOut = run(t, "network", "remove", "--socket", socket, "cnf/sriov-a")
	if code != 0 || !strings.Contains(out, "removed") {
		t.Fatalf("remove: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = run(t, "network", "remove", "--socket", socket, "--namespace", "cnf", "sriov-a")
	if code != 1 || !strings.Contains(errOut, "NotFound") {
		t.Errorf("remove again: exit %d, want 1 and NotFound\n%s", code, errOut)
	}
}

func TestCRINet_Hwnetctl_Errors(t *testing.T) {
	socket := serveNetworks(t)
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte(strings.Replace(networkFile, "10.56.0.0/24", "10.56.0.0/33", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", []string{"network"}, 2, "want a subcommand"},
		{"set without -f", []string{"network", "set", "--socket", socket}, 2, "-f FILE is required"},
		{"set missing file", []string{"network", "set", "--socket", socket, "-f", "/nonexistent"}, 1, "/nonexistent"},
		{"set invalid", []string{"network", "set", "--socket", socket, "-f", bad}, 1, `config.ip_ranges[0].cidr: "10.56.0.0/33"`},
		{"remove without name", []string{"network", "remove", "--socket", socket}, 2, "want one network"},
		{"list bad format", []string{"network", "list", "--socket", socket, "-o", "yaml"}, 2, `-o "yaml"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := run(t, tt.args...)
			if code != tt.code || !strings.Contains(errOut, tt.want) {
				t.Errorf("exit %d, want %d; stderr %q, want it to contain %q", code, tt.code, errOut, tt.want)
			}
		})
	}
}
