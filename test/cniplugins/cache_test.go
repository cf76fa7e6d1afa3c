package cniplugins

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestCacheRootFromEnvironment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cni-bin")
	t.Setenv("HWNET_CNI_BIN_CACHE", dir)
	root, err := cacheRoot()
	if err != nil || root != dir {
		t.Fatalf("cacheRoot() = %q, %v; want HWNET_CNI_BIN_CACHE's %s", root, err, dir)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Errorf("cache root not created: %v", err)
	}
}

// Test binaries run in parallel share the cache: whatever they miss at
// once is built by one of them only.
func TestCacheFillBuildsOnce(t *testing.T) {
	c := &cache{root: t.TempDir(), logf: t.Logf}
	bin := filepath.Join(c.root, "plugin")
	missing := func() []string {
		if _, err := os.Stat(bin); err != nil {
			return []string{"plugin"}
		}
		return nil
	}
	var builds atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			err := c.fill(missing, func([]string) error {
				builds.Add(1)
				time.Sleep(20 * time.Millisecond) // let the others queue on the lock
				return os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds, want 1", n)
	}
}

func TestCacheStaleFindsWrongBinaries(t *testing.T) {
	c := &cache{root: t.TempDir()}
	if err := os.WriteFile(filepath.Join(c.root, "host-device"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // a Go binary, but not from pluginsModule
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(c.root, "macvlan")); err != nil {
		t.Fatal(err)
	}
	in := install{module: pluginsModule, version: Version, packages: []string{"plugins/main/host-device", "plugins/main/macvlan"}}
	if got := strings.Join(c.stale(in), ","); got != "plugins/main/host-device,plugins/main/macvlan" {
		t.Errorf("stale = %q, want both the script and the foreign Go binary", got)
	}
}

// Dir's binaries come from the modules and versions its doc promises.
func TestDirBinaryVersions(t *testing.T) {
	dir := Dir(t)
	out, err := exec.CommandContext(t.Context(), "go", "list", "-m", "-f", "{{.Version}}", cniModule).Output()
	if err != nil {
		t.Fatalf("go list -m %s: %v", cniModule, err)
	}
	cniVersion := strings.TrimSpace(string(out))
	tests := []struct{ name, module, version string }{
		{"host-device", pluginsModule, Version},
		{"portmap", pluginsModule, Version},
		{"cnitool", cniModule, cniVersion},
		{Recorder, "github.com/hwnet-io/hwnet", "(devel)"},
	}
	for _, tt := range tests {
		info, err := buildinfo.ReadFile(filepath.Join(dir, tt.name))
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if info.Main.Path != tt.module || info.Main.Version != tt.version {
			t.Errorf("%s built from %s@%s, want %s@%s", tt.name, info.Main.Path, info.Main.Version, tt.module, tt.version)
		}
	}
}

// sourceKey decides whether the cached recorder is current; it must change
// with every source the recorder is built from, and with nothing else.
func TestSourceKeyFollowsRecorderSources(t *testing.T) {
	module := t.TempDir()
	src := filepath.Join(module, "test", "cniplugins", "recorder")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(module, "go.mod"), "module example.com/m\n")
	write(filepath.Join(module, "go.sum"), "")
	write(filepath.Join(src, "main.go"), "package main\n")
	key := func() string {
		t.Helper()
		k, err := sourceKey(src)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	base := key()
	steps := []struct {
		name    string
		edit    func()
		changes bool
	}{
		{"test file added", func() { write(filepath.Join(src, "main_test.go"), "package main\n") }, false},
		{"source edited", func() { write(filepath.Join(src, "main.go"), "package main\n\n") }, true},
		{"source added", func() { write(filepath.Join(src, "more.go"), "package main\n") }, true},
		{"go.sum changed", func() { write(filepath.Join(module, "go.sum"), "x v1 h1:\n") }, true},
		{"go.mod changed", func() { write(filepath.Join(module, "go.mod"), "module example.com/m\n\ngo 1.26\n") }, true},
	}
	for _, s := range steps {
		s.edit()
		got := key()
		if (got != base) != s.changes {
			t.Errorf("%s: key changed = %v, want %v", s.name, got != base, s.changes)
		}
		base = got
	}
}

// The recorder's cache key covers only its own directory, which holds only
// while it imports nothing else from hwnet.
func TestRecorderImportsNothingFromHwnet(t *testing.T) {
	const recorderPkg = "github.com/hwnet-io/hwnet/test/cniplugins/recorder"
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "-f", "{{.ImportPath}}", recorderPkg).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/hwnet-io/hwnet") && pkg != recorderPkg {
			t.Errorf("recorder imports %s: extend sourceKey to hash it", pkg)
		}
	}
}

func TestPruneRecordersKeepsRecentBuilds(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, age := range map[string]time.Duration{"old": 8 * 24 * time.Hour, "recent": time.Hour} {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, now.Add(-age), now.Add(-age)); err != nil {
			t.Fatal(err)
		}
	}
	if err := pruneRecorders(dir, now); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "recent" {
		t.Errorf("after prune: %v, want only recent", entries)
	}
}

func BenchmarkDirWarm(b *testing.B) {
	Dir(b) // build once, outside the measurement
	for b.Loop() {
		Dir(b)
	}
}
