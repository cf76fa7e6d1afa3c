// Package cniplugins provides CNI plugin binaries to tests: hwnet's own
// test plugin (hwnet-test-plugin, built from ./recorder), the
// containernetworking reference plugins at Version and cnitool, and reads the
// records the test plugin leaves behind.
//
// The binaries are built once into a cache directory shared by test binaries
// and kept between runs: HWNET_CNI_BIN_CACHE when set, else
// /var/cache/hwnet-ci/cni-bin/<Version> when writable, else
// os.UserCacheDir()/hwnet/cni-bin/<Version>. test/install-cni-plugins.sh
// fills such a directory ahead of time for CI.
package cniplugins

import (
	"os"
	"path/filepath"
	"testing"
)

// Version is the containernetworking/plugins release Dir provides.
const Version = "v1.9.1"

// Recorder is the type (binary name) of hwnet's own test plugin.
const Recorder = "hwnet-test-plugin"

// Module paths whose binaries Dir installs.
const (
	pluginsModule = "github.com/containernetworking/plugins"
	cniModule     = "github.com/containernetworking/cni"
)

// referencePlugins are the packages of pluginsModule that Dir provides.
func referencePlugins() []string {
	return []string{
		"plugins/main/host-device", "plugins/main/macvlan", "plugins/main/bridge",
		"plugins/ipam/static", "plugins/ipam/host-local",
		"plugins/meta/tuning", "plugins/meta/bandwidth", "plugins/meta/portmap",
	}
}

// Dir returns a directory, private to t, holding hwnet-test-plugin built
// from the working tree, the reference plugins host-device, macvlan, bridge,
// static, host-local, tuning, bandwidth and portmap at Version, and cnitool
// at the containernetworking/cni version in go.mod. It builds whatever the
// cache lacks, which takes minutes when the Go build cache is cold too.
func Dir(t testing.TB) string {
	t.Helper()
	c, err := openCache(t.Logf)
	if err != nil {
		t.Fatalf("cniplugins: %v", err)
	}
	binaries, err := c.binaries(t.Context())
	if err != nil {
		t.Fatalf("cniplugins: %v", err)
	}
	dir := t.TempDir()
	for _, path := range binaries {
		if err := os.Symlink(path, filepath.Join(dir, filepath.Base(path))); err != nil {
			t.Fatalf("cniplugins: %v", err)
		}
	}
	return dir
}
