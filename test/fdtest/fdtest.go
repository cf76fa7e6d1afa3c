// Package fdtest makes the test process run out of file descriptors, as a
// node out of inotify instances or descriptors makes a daemon: the next
// inotify_init1, open or socket fails with EMFILE.
package fdtest

import (
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Exhaust lowers the process's soft descriptor limit so that the next new
// descriptor fails with EMFILE, and returns what puts the limit back (also
// done when the test ends). The limit is the process's: a test using it
// must not run in parallel with others.
func Exhaust(t testing.TB) (restore func()) {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	// A new descriptor takes the lowest free number, and one at or above
	// the limit fails: the limit at the lowest free number fails them all.
	lowest, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(lowest)
	low := old
	low.Cur = uint64(lowest)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
				t.Errorf("restore the descriptor limit: %v", err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}
