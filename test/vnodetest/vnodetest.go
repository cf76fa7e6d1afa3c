// Package vnodetest builds virtual SR-IOV nodes for tests: root checks,
// per-test state directories and stand-ins for the kernel families this
// machine lacks.
package vnodetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// requireRootEnv set to 1, as CI sets it, makes a test that would skip
// for want of root or of a prerequisite fail instead.
const requireRootEnv = "HWNET_REQUIRE_ROOT"

// Unavailable skips a test whose prerequisite other than root (a tool, a
// system entry) is missing, and fails it instead when HWNET_REQUIRE_ROOT=1:
// CI must run every test, not report a skipped one as passed.
func Unavailable(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv(requireRootEnv) == "1" {
		t.Fatalf("%s, and %s=1 forbids skipping", reason, requireRootEnv)
	}
	t.Skip(reason)
}

// RequireRoot skips a test that needs root (network namespaces, veth
// links, mounts) when not root or with -short, and fails it instead when
// the environment has HWNET_REQUIRE_ROOT=1, as CI does, where such tests
// must run.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Getenv(requireRootEnv) == "1" {
		if os.Geteuid() != 0 {
			t.Fatal("needs root, and HWNET_REQUIRE_ROOT=1 forbids skipping")
		}
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, veth links and mounts")
	}
	if testing.Short() {
		t.Skip("needs root: network namespaces, veth links and mounts; skipped with -short")
	}
}

// BuildForTest builds spec for a test and destroys the node when the test
// ends. With links it needs root (see RequireRoot), and the node's name
// gets the test process's ID appended: the name names the netns, which is
// machine-wide, and `go test ./...` runs packages at once, each with its
// own "default" node. Within a package, names must stay unique among the
// tests that run at once.
func BuildForTest(t testing.TB, spec *virtualnode.Spec, db *hwdb.DB, links bool) *virtualnode.Node {
	t.Helper()
	if links {
		RequireRoot(t)
		spec = withProcessName(spec)
	}
	n, err := virtualnode.Build(context.Background(), spec, db, virtualnode.Options{Dir: Dir(t), Links: links})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Destroy(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// withProcessName returns a copy of spec named <name>-<pid>, cut to the
// longest name a spec may have.
func withProcessName(spec *virtualnode.Spec) *virtualnode.Spec {
	suffix := fmt.Sprintf("-%d", os.Getpid())
	named := *spec
	named.Name = spec.Name[:min(len(spec.Name), virtualnode.MaxNameLen-len(suffix))] + suffix
	return &named
}

// Dir returns a directory for a test node's state. As root Build
// mounts a tmpfs there; otherwise the directory is on /dev/shm when that
// is a tmpfs, because writing and removing thousands of files on a disk
// file system takes seconds.
func Dir(t testing.TB) string {
	t.Helper()
	var fs unix.Statfs_t
	if os.Geteuid() == 0 || unix.Statfs("/dev/shm", &fs) != nil || fs.Type != unix.TMPFS_MAGIC {
		return filepath.Join(t.TempDir(), "node")
	}
	dir, err := os.MkdirTemp("/dev/shm", "virtualnode-test-")
	if err != nil {
		return filepath.Join(t.TempDir(), "node")
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "node")
}

// OpenDB opens the built-in hardware database for a test.
func OpenDB(t testing.TB) *hwdb.DB {
	t.Helper()
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// NoESwitch is devlink as this machine's kernel has it: missing. Given to
// discovery as its ESwitchReader, it makes discovery assume legacy mode;
// a VF layout that sets a mode through it fails.
type NoESwitch struct{}

// ESwitchMode fails as devlink does without its netlink family.
func (NoESwitch) ESwitchMode(context.Context, string) (string, error) {
	return "", fmt.Errorf("devlink: %w", unix.ENOENT)
}

// SetESwitchMode fails as devlink does without its netlink family.
func (NoESwitch) SetESwitchMode(context.Context, string, string) error {
	return fmt.Errorf("devlink: %w", unix.ENOENT)
}

// AddSF fails as devlink does without its netlink family.
func (NoESwitch) AddSF(context.Context, string, int) error {
	return fmt.Errorf("devlink: %w", unix.ENOENT)
}

// DeleteSF fails as devlink does without its netlink family.
func (NoESwitch) DeleteSF(context.Context, string, int) error {
	return fmt.Errorf("devlink: %w", unix.ENOENT)
}

// VDPA is an in-memory vDPA netlink family, listing these devices: the
// kernel here has none, and a virtual node no vDPA bus.
type VDPA []discovery.ParentedVDPA

// VDPADevices lists the devices.
func (v VDPA) VDPADevices(context.Context) ([]discovery.ParentedVDPA, error) { return v, nil }

// EnactWrites runs the node's kernel emulation (Node.EnactWrites) until
// the test ends, so that writes to the tree's sriov_numvfs, unbind, bind
// and drivers_probe change the node as the kernel would. It returns once
// the emulation watches.
func EnactWrites(t testing.TB, node *virtualnode.Node) {
	t.Helper()
	emulate(t, func(ctx context.Context, log *slog.Logger, ready func()) error {
		return node.EnactWrites(ctx, log, ready)
	})
}

// EnactDevlinkRecord runs the node's emulation of mlx5's SF ports
// (Node.EnactDevlinkRecord) on the devlink record at path until the test
// ends: the record's port adds and dels make and delete the node's SFs. It
// returns once the emulation watches.
func EnactDevlinkRecord(t testing.TB, node *virtualnode.Node, path string) {
	t.Helper()
	emulate(t, func(ctx context.Context, log *slog.Logger, ready func()) error {
		return node.EnactDevlinkRecord(ctx, log, path, "", ready)
	})
}

// emulate runs one part of the kernel emulation until the test ends,
// once it is ready.
func emulate(t testing.TB, run func(ctx context.Context, log *slog.Logger, ready func()) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- run(ctx, slog.New(slog.NewTextHandler(testWriter{t}, nil)), func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("kernel emulation: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("kernel emulation: %v", err)
		}
	})
}

// testWriter logs to the test.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
