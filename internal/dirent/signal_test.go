package dirent

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNamesUnderSignals lists a directory while signals keep arriving at
// the listing thread, as Go's preemption signals (SIGURG) do on a loaded
// machine. The kernel then ends a getdents call early, with fewer entries
// than fit (fs/readdir.c filldir64 stops at a pending signal once it has
// written one): a short read is not the end of the directory.
func TestNamesUnderSignals(t *testing.T) {
	dir := t.TempDir()
	const n = 3000
	for i := range n {
		if err := os.WriteFile(filepath.Join(dir, "virtfn"+strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := unix.Getpid(), unix.Gettid()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		for !stop.Load() {
			_ = unix.Tgkill(pid, tid, unix.SIGURG)
		}
	}()
	defer func() { stop.Store(true); <-done }()
	var r Reader
	for round := range 300 {
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		names, err := r.Names(fd)
		unix.Close(fd)
		if err != nil || len(names) != n {
			t.Fatalf("round %d: %d of %d entries (%v)", round, len(names), n, err)
		}
	}
}
