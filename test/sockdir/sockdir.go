// Package sockdir gives tests a directory whose paths fit a unix socket
// address (108 bytes), which t.TempDir's, named after the test, may not.
package sockdir

import (
	"net"
	"os"
	"testing"
	"time"
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

// Await returns once something answers on the unix socket at path, which a
// server started in another goroutine binds and then listens on: a dial
// between the two is refused, so the file existing is not enough. It fails
// the test if served yields first (the server returned) or nothing answers
// within 30 s.
func Await(t testing.TB, path string, served <-chan error) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		select {
		case err := <-served:
			t.Fatalf("the server on %s returned before it answered: %v", path, err)
		default:
		}
		if conn, err := net.Dial("unix", path); err == nil {
			conn.Close()
			return
		}
	}
	t.Fatalf("nothing answered on %s within 30s", path)
}
