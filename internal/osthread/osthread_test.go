package osthread

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// onMainThread runs functions on the main thread, where TestMain serves it.
var onMainThread = make(chan func())

// init runs on the main thread; locking there keeps TestMain on it.
func init() { runtime.LockOSThread() }

func TestMain(m *testing.M) {
	done := make(chan int)
	go func() { done <- m.Run() }()
	for {
		select {
		case fn := <-onMainThread:
			fn()
		case code := <-done:
			os.Exit(code)
		}
	}
}

// TestRunLockedOnMainThread takes the case that left the main thread of a
// test binary in an e2e cluster's mount namespace: the goroutine meant to
// enter the namespaces starts on the main thread.
func TestRunLockedOnMainThread(t *testing.T) {
	type threads struct{ caller, fn, after int }
	got := make(chan threads)
	onMainThread <- func() {
		var th threads
		th.caller = unix.Gettid()
		err := runLocked(func() error { th.fn = unix.Gettid(); return nil })
		th.after = unix.Gettid()
		if err != nil {
			t.Error(err)
		}
		got <- th
	}
	th := <-got
	if pid := unix.Getpid(); th.caller != pid || th.after != pid {
		t.Fatalf("TestMain ran on thread %d, then %d; want the main thread %d", th.caller, th.after, pid)
	}
	if th.fn == th.caller {
		t.Errorf("fn ran on the main thread %d; want a thread of its own", th.fn)
	}
}

func TestRunReturnsFnError(t *testing.T) {
	want := os.ErrDeadlineExceeded
	if err := Run(func() error { return want }); err != want {
		t.Errorf("Run = %v, want %v", err, want)
	}
}
