package cniplugins

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/containernetworking/cni/pkg/version"
)

// TestDirAnswersVersion runs every plugin in Dir with CNI_COMMAND=VERSION:
// each must be there, executable, and speak the CNI versions hwnet needs.
func TestDirAnswersVersion(t *testing.T) {
	dir := Dir(t)
	plugins := []string{Recorder}
	for _, pkg := range referencePlugins() {
		plugins = append(plugins, path.Base(pkg))
	}
	for _, name := range plugins {
		t.Run(name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), filepath.Join(dir, name))
			cmd.Env = append(os.Environ(), "CNI_COMMAND=VERSION")
			cmd.Stdin = bytes.NewReader(nil)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s VERSION: %v", name, err)
			}
			var info struct {
				Supported []string `json:"supportedVersions"`
			}
			if err := json.Unmarshal(out, &info); err != nil {
				t.Fatalf("%s VERSION printed %q: %v", name, out, err)
			}
			if !slices.Contains(info.Supported, version.Current()) {
				t.Errorf("%s supports %v, want %s among them", name, info.Supported, version.Current())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "cnitool")); err != nil {
		t.Errorf("cnitool: %v", err)
	}
}
