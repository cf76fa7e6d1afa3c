package readiness

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/test/fdtest"
	"github.com/hwnet-io/hwnet/test/logtest"
)

const bridgeConf = `{"cniVersion":"0.4.0","name":"podnet","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`

func readOwn(t *testing.T, w *Writer) (ownList, bool) {
	t.Helper()
	data, err := os.ReadFile(w.Path())
	if errors.Is(err, os.ErrNotExist) {
		return ownList{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var l ownList
	if err := json.Unmarshal(data, &l); err != nil {
		t.Fatalf("hwnet's file is not JSON: %v\n%s", err, data)
	}
	return l, true
}

// NPWG 6.1: hwnet's configuration appears only once the default network's
// does, follows it, and goes when it goes.
func TestSpec6_1_WrittenOnlyWhenDefaultNetworkReady(t *testing.T) {
	dir := t.TempDir()
	w := New(Options{ConfDir: dir, Template: pluginconf.Conf{SocketPath: "/run/x.sock", CacheDir: "/var/x"}})
	if _, err := w.Sync(); !errors.Is(err, ErrNoDefaultNetwork) {
		t.Fatalf("Sync with no default network: %v, want ErrNoDefaultNetwork", err)
	}
	if _, ok := readOwn(t, w); ok {
		t.Fatal("hwnet's config written before the default network's exists")
	}
	def := filepath.Join(dir, "10-podnet.conflist")
	os.WriteFile(def, []byte(bridgeConf), 0o644)
	if got, err := w.Sync(); err != nil || got != def {
		t.Fatalf("Sync = %q, %v; want %s", got, err, def)
	}
	l, ok := readOwn(t, w)
	if !ok || l.CNIVersion != "0.4.0" || len(l.Plugins) != 1 {
		t.Fatalf("hwnet's config = %+v", l)
	}
	p := l.Plugins[0]
	if p.Type != "hwnet" || p.DefaultNetwork != def || p.SocketPath != "/run/x.sock" || !p.Capabilities["portMappings"] {
		t.Errorf("plugin entry = %+v, want type hwnet, the default network's file and capabilities (7.5)", p)
	}
	os.Remove(def)
	w.Sync()
	if _, ok := readOwn(t, w); ok {
		t.Fatal("hwnet's config kept after the default network's went")
	}
}

func TestDefaultNetworkChoice(t *testing.T) {
	tests := []struct {
		name, choose, want string
	}{
		{"first configuration, as runtimes take it", "", "10-a.conflist"},
		{"by file name", "20-b.conf", "20-b.conf"},
		{"by network name", "b", "20-b.conf"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "10-a.conflist"), []byte(`{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"bridge"}]}`), 0o644)
			os.WriteFile(filepath.Join(dir, "20-b.conf"), []byte(`{"cniVersion":"1.0.0","name":"b","type":"ptp"}`), 0o644)
			os.WriteFile(filepath.Join(dir, "05-broken.conf"), []byte(`{`), 0o644)
			w := New(Options{ConfDir: dir, DefaultNetwork: tt.choose})
			got, err := w.Sync()
			if err != nil || filepath.Base(got) != tt.want {
				t.Fatalf("Sync = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// The runtime reads hwnet's file from its own directory while the default
// network's stays where its installer put it (NPWG 6.1.1). hwnet's file
// removed there (by hand, or a clean-up of the directory) is written again
// at once: the node's pods would otherwise start with the default network
// alone, without the networks they asked for.
func TestSpec6_1_1_SeparateOutputDirFollowsChanges(t *testing.T) {
	confDir, outDir := t.TempDir(), t.TempDir()
	// No periodic re-read: inotify alone must bring every change.
	w := New(Options{ConfDir: confDir, OutputDir: outDir, Interval: time.Hour})
	running(t, w)
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"), []byte(bridgeConf), 0o644)
	waitFor(t, func() bool { _, ok := readOwn(t, w); return ok }, "hwnet's config to appear")
	if filepath.Dir(w.Path()) != outDir {
		t.Fatalf("written to %s, want %s", w.Path(), outDir)
	}
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"), []byte(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"bridge"}]}`), 0o644)
	waitFor(t, func() bool { l, _ := readOwn(t, w); return l.CNIVersion == "1.1.0" }, "an edit in place to be followed")
	os.Remove(w.Path())
	waitFor(t, func() bool { _, ok := readOwn(t, w); return ok }, "hwnet's config to be written again")
	os.Remove(filepath.Join(confDir, "10-podnet.conflist"))
	waitFor(t, func() bool { _, ok := readOwn(t, w); return !ok }, "hwnet's config to go")
}

// running runs w until the test ends.
func running(t *testing.T, w *Writer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunOutlivesAWatchItCannotMake: a node out of inotify instances (or
// of file descriptors) at start gets hwnet's configuration all the same,
// at the next re-read, and the watch once it can be made; Run does not
// give up and leave the node without a CNI configuration. The process's
// descriptor limit stands in for the node's inotify limit: both fail
// inotify_init1 with EMFILE.
func TestRunOutlivesAWatchItCannotMake(t *testing.T) {
	confDir, outDir := t.TempDir(), t.TempDir()
	var logs logtest.Buffer
	w := New(Options{ConfDir: confDir, OutputDir: outDir, Interval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ended := fdtest.Starve(t, &logs, w.Run)
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"), []byte(bridgeConf), 0o644)
	waitFor(t, func() bool {
		if done, err := ended(); done {
			t.Fatalf("Run returned %v without its watch; want it to keep re-reading", err)
		}
		_, ok := readOwn(t, w)
		return ok
	}, "hwnet's config to appear")
}

// TestRunWatchesAgainAWatchThatEnded: a watch that ends (here: ConfDir
// made anew while the process is out of descriptors, so the watch cannot
// list it) is made again; Run does not go on trusting a dead watch, which
// nothing else would replace now that a watched node is not re-read
// periodically.
func TestRunWatchesAgainAWatchThatEnded(t *testing.T) {
	base := t.TempDir()
	confDir, outDir := filepath.Join(base, "net.d"), t.TempDir()
	os.Mkdir(confDir, 0o755)
	var logs logtest.Buffer
	w := New(Options{ConfDir: confDir, OutputDir: outDir, Interval: 20 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	running(t, w)
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"), []byte(bridgeConf), 0o644)
	waitFor(t, func() bool { _, ok := readOwn(t, w); return ok }, "hwnet's config to appear")

	os.Remove(filepath.Join(confDir, "10-podnet.conflist"))
	waitFor(t, func() bool { _, ok := readOwn(t, w); return !ok }, "hwnet's config to go with the default network's")
	restore := fdtest.Exhaust(t)
	os.Remove(confDir)
	os.Mkdir(confDir, 0o755)
	waitFor(t, func() bool { return logs.Contains("watch ended") }, "the watch to end")
	restore()
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"), []byte(bridgeConf), 0o644)
	waitFor(t, func() bool { _, ok := readOwn(t, w); return ok }, "hwnet's config to come back through a new watch")
}
