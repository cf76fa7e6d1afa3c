// Package sockdir gives tests a directory whose paths fit a unix socket
// address (108 bytes), which t.TempDir's, named after the test, may not.
package sockdir

import (
	"os"
	"testing"
)

// New returns a new directory under the system's temporary directory,
// removed when the test ends.
func New(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "hw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
