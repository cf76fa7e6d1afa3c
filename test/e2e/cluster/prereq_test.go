package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMissingCommands: a machine with containerd, runc and util-linux but
// no iptables lacks what a worker node's namespace needs (make demo
// NODES=3 failed at its first DNAT rule on a fresh Debian machine), and
// ensureRuntime installs the package that has it.
func TestMissingCommands(t *testing.T) {
	dir := t.TempDir()
	for _, name := range runtimeCommands() {
		if name == "iptables" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	if got := missingCommands(); !slices.Equal(got, []string{"iptables"}) {
		t.Errorf("missing %v, want [iptables]", got)
	}
	if !slices.Contains(runtimePackages(), "iptables") {
		t.Errorf("packages %v install no iptables", runtimePackages())
	}
}
