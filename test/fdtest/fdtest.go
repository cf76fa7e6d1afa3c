// Package fdtest makes the test process run out of file descriptors, as a
// node out of inotify instances or descriptors makes a daemon: the next
// inotify_init1, open or socket fails with EMFILE.
package fdtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/test/logtest"
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

// Starve starts run with the process out of descriptors and gives them
// back once run has logged a failure to get one (logs holds "too many
// open files") or has returned. The returned func reports whether run has
// returned, and with what. run's context ends with the test, which waits
// for it.
func Starve(t testing.TB, logs *logtest.Buffer, run func(context.Context) error) (ended func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	finished := make(chan struct{})
	restore := Exhaust(t)
	go func() { defer close(finished); runErr = run(ctx) }()
	t.Cleanup(func() { cancel(); <-finished })
	ended = func() (bool, error) {
		select {
		case <-finished:
			return true, runErr
		default:
			return false, nil
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !logs.Contains("too many open files") {
		if done, _ := ended(); done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run neither failed for want of a descriptor nor returned within 10s; log:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	restore()
	return ended
}
