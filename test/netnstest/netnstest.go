// Package netnstest adds named network namespaces for tests as a runtime
// adds a pod's: `ip netns add`, deleted when the test ends.
package netnstest

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Dir is where `ip netns` keeps its named namespaces.
const Dir = "/run/netns"

// Add adds the named network namespace for tb's life and returns its
// path, as CNI_NETNS names it. A test that deleted it itself leaves the
// cleanup nothing to do; a delete that fails fails the test.
func Add(tb testing.TB, name string) string {
	tb.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		tb.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	path := filepath.Join(Dir, name)
	tb.Cleanup(func() {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			tb.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	return path
}
