package watch

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestWatchStack holds a directory watch to a small stack: the agent
// keeps a dozen for as long as it runs (its configuration, kubelet's
// sockets, the device-info, CDI and CNI directories, each pool's socket).
// fsnotify's reader kept 264 KiB of stack per watch (128 KiB from
// v1.10), a 64 KiB buffer on it.
func TestWatchStack(t *testing.T) {
	const watches = 16
	before := stackInUse()
	for range watches {
		dir := t.TempDir()
		w, err := WatchSockets(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := run(t, w.Run)
		makeSocket(t, filepath.Join(dir, "kubelet.sock"))
		if ev := receive(t, events); ev.Name != "kubelet.sock" {
			t.Fatalf("event %+v, want kubelet.sock created", ev)
		}
	}
	// Each watch is two goroutines, its reader and its forwarder, and
	// the test's own a third; 8 KiB stacks each, doubled once.
	const most = 48 << 10
	per := (stackInUse() - before) / watches
	t.Logf("%d KiB of goroutine stacks per watch", per>>10)
	if per > most {
		t.Errorf("%d KiB of goroutine stacks per watch, want at most %d", per>>10, most>>10)
	}
}

// stackInUse is the bytes of goroutine stacks once two collections have
// shrunk what they can.
func stackInUse() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.StackInuse)
}

func TestInotifyEvents(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	tests := []struct {
		name   string
		change func(t *testing.T)
		want   []fileEvent
	}{
		{"created", func(t *testing.T) { write(t, filepath.Join(dir, "a"), "x") },
			[]fileEvent{{Path: filepath.Join(dir, "a"), Op: opCreate}, {Path: filepath.Join(dir, "a"), Op: opWrite}}},
		{"moved in", func(t *testing.T) {
			write(t, filepath.Join(other, "b"), "x")
			rename(t, filepath.Join(other, "b"), filepath.Join(dir, "b"))
		},
			[]fileEvent{{Path: filepath.Join(dir, "b"), Op: opCreate}}},
		{"moved away", func(t *testing.T) { rename(t, filepath.Join(dir, "b"), filepath.Join(other, "b")) },
			[]fileEvent{{Path: filepath.Join(dir, "b"), Op: opRename}}},
		{"chmod", func(t *testing.T) { chmod(t, filepath.Join(dir, "a")) },
			[]fileEvent{{Path: filepath.Join(dir, "a"), Op: opChmod}}},
		{"removed", func(t *testing.T) { remove(t, filepath.Join(dir, "a")) },
			[]fileEvent{{Path: filepath.Join(dir, "a"), Op: opRemove}}},
		{"watched directory removed", func(t *testing.T) { remove(t, sub) },
			[]fileEvent{{Path: sub, Op: opRemove}, {Path: sub, Op: opRemove}}},
	}
	n, err := newInotify()
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	for _, p := range []string{dir, sub} {
		if err := n.add(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.change(t)
			var got []fileEvent
			for len(got) < len(tt.want) {
				evs, err := n.read()
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, evs...)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestInotifyMissingAndClosed(t *testing.T) {
	n, err := newInotify()
	if err != nil {
		t.Fatal(err)
	}
	missingDir := filepath.Join(t.TempDir(), "missing")
	if err := n.add(missingDir); !missing(err) {
		t.Errorf("add of a missing directory: %v, want it missing", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	write(t, file, "x")
	if err := n.add(file); !missing(err) {
		t.Errorf("add of a file: %v, want it not a directory", err)
	}
	read := make(chan error, 1)
	go func() { _, err := n.read(); read <- err }()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, read); !closedRead(err) {
		t.Errorf("read waiting when closed: %v, want it closed", err)
	}
	// The descriptor's number may name another file by then.
	if err := n.add(t.TempDir()); err == nil {
		t.Error("add after Close: no error")
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
}
