package watch

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// makeSocket binds a unix socket at path and closes it, which leaves the
// socket file, as a server that went away does.
func makeSocket(t *testing.T, path string) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatalf("bind %s: %v", path, err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// plugins matches kubelet's socket and the agent's plugin sockets.
func plugins(name string) bool {
	return name == "kubelet.sock" || strings.HasPrefix(name, "hwnet-")
}

func TestSocketWatcher(t *testing.T) {
	tests := []struct {
		name string
		// dir is the watched directory below the test's temporary one,
		// which exists before the watch starts unless absent, with the
		// sockets existing.
		dir      string
		absent   bool
		existing []string
		change   func(t *testing.T, dir string)
		want     []SocketEvent
	}{{
		name:   "kubelet socket created",
		dir:    "device-plugins",
		change: func(t *testing.T, dir string) { makeSocket(t, filepath.Join(dir, "kubelet.sock")) },
		want:   []SocketEvent{{Name: "kubelet.sock"}},
	}, {
		name:     "plugin socket removed",
		dir:      "device-plugins",
		existing: []string{"kubelet.sock", "hwnet-a.sock", "hwnet-b.sock"},
		change:   func(t *testing.T, dir string) { remove(t, filepath.Join(dir, "hwnet-a.sock")) },
		want:     []SocketEvent{{Name: "hwnet-a.sock", Removed: true}},
	}, {
		name:     "kubelet restart",
		dir:      "device-plugins",
		existing: []string{"kubelet.sock", "hwnet-a.sock", "other.sock"},
		change: func(t *testing.T, dir string) {
			for _, name := range []string{"hwnet-a.sock", "other.sock", "kubelet.sock"} {
				remove(t, filepath.Join(dir, name))
			}
			makeSocket(t, filepath.Join(dir, "kubelet.sock"))
		},
		want: []SocketEvent{{Name: "hwnet-a.sock", Removed: true}, {Name: "kubelet.sock"}},
	}, {
		name:   "directory and parent made later",
		dir:    "kubelet/device-plugins",
		absent: true,
		change: func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			makeSocket(t, filepath.Join(dir, "kubelet.sock"))
		},
		want: []SocketEvent{{Name: "kubelet.sock"}},
	}, {
		name:     "directory made again",
		dir:      "device-plugins",
		existing: []string{"kubelet.sock", "hwnet-a.sock"},
		change: func(t *testing.T, dir string) {
			remove(t, dir)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			makeSocket(t, filepath.Join(dir, "kubelet.sock"))
		},
		want: []SocketEvent{{Name: "hwnet-a.sock", Removed: true}, {Name: "kubelet.sock"}},
	}, {
		name:     "directory renamed",
		dir:      "device-plugins",
		existing: []string{"kubelet.sock"},
		change: func(t *testing.T, dir string) {
			if err := os.Rename(dir, dir+".old"); err != nil {
				t.Fatal(err)
			}
		},
		want: []SocketEvent{{Name: "kubelet.sock", Removed: true}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), tt.dir)
			if !tt.absent {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tt.existing {
				makeSocket(t, filepath.Join(dir, name))
			}
			w, err := WatchSockets(dir, plugins)
			if err != nil {
				t.Fatal(err)
			}
			events := run(t, w.Run)
			tt.change(t, dir)
			expectSockets(t, events, tt.want)
			expectNone(t, events, quiet)
		})
	}
}

// expectSockets reads socket events until the latest of each name wanted
// is the one wanted; every event must be of a name wanted.
func expectSockets(t *testing.T, events <-chan SocketEvent, want []SocketEvent) {
	t.Helper()
	latest := map[string]SocketEvent{}
	for !slices.EqualFunc(want, want, func(w, _ SocketEvent) bool { return latest[w.Name] == w }) {
		ev := receive(t, events)
		if !slices.ContainsFunc(want, func(w SocketEvent) bool { return w.Name == ev.Name }) {
			t.Errorf("unexpected %+v", ev)
		}
		latest[ev.Name] = ev
	}
}

func TestSocketWatcherAllEntries(t *testing.T) {
	dir := t.TempDir()
	w, err := WatchSockets(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)
	write(t, filepath.Join(dir, "kubelet_internal_checkpoint"), "{}")
	if ev := receive(t, events); ev != (SocketEvent{Name: "kubelet_internal_checkpoint"}) {
		t.Errorf("event %+v, want kubelet_internal_checkpoint created", ev)
	}
}

// TestWatchEntriesReplaced: a file replaced the way atomic writers do it
// (a hidden temporary written, then renamed over the file) is reported
// as written, once, and the temporary, which Visible leaves out, not at
// all.
func TestWatchEntriesReplaced(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "checkpoint.json")
	write(t, conf, "{}")
	w, err := WatchEntries(dir, Visible)
	if err != nil {
		t.Fatal(err)
	}
	events := run(t, w.Run)
	tmp := filepath.Join(dir, ".checkpoint.json.tmp-1")
	write(t, tmp, `{"version": 2}`)
	if err := os.Rename(tmp, conf); err != nil {
		t.Fatal(err)
	}
	if ev := receive(t, events); ev != (SocketEvent{Name: "checkpoint.json", Written: true}) {
		t.Errorf("event %+v, want checkpoint.json written", ev)
	}
	// Nothing of the temporary is pending: the next event is the next
	// change.
	remove(t, conf)
	if ev := receive(t, events); ev != (SocketEvent{Name: "checkpoint.json", Removed: true}) {
		t.Errorf("event %+v, want checkpoint.json removed", ev)
	}
}

// TestWatchEntriesWrites: a file rewritten in place is reported, which
// WatchSockets leaves out.
func TestWatchEntriesWrites(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "10-podnet.conflist")
	write(t, conf, "{}")
	removed := SocketEvent{Name: "10-podnet.conflist", Removed: true}
	for _, tt := range []struct {
		name    string
		watch   func(string, func(string) bool) (*SocketWatcher, error)
		written bool
	}{
		{"WatchEntries", WatchEntries, true},
		// The removal that follows is the first event WatchSockets sends.
		{"WatchSockets", WatchSockets, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w, err := tt.watch(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			events := run(t, w.Run)
			write(t, conf, `{"cniVersion": "1.1.0"}`)
			// The write is received before the removal is made: a write
			// whose file is gone by the time it is looked at may be
			// reported as the removal alone.
			if tt.written {
				if ev := receive(t, events); ev != (SocketEvent{Name: "10-podnet.conflist", Written: true}) {
					t.Errorf("first event %+v, want the write", ev)
				}
			}
			remove(t, conf)
			// A write may come as two events (truncate, then the data).
			ev := receive(t, events)
			for tt.written && ev.Written {
				ev = receive(t, events)
			}
			if ev != removed {
				t.Errorf("event %+v, want %+v", ev, removed)
			}
			write(t, conf, "{}")
			receive(t, events) // created again, for the next case
		})
	}
}
