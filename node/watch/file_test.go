package watch

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// quiet is how long a test waits to be sure no event comes: well past
// fileSettle.
const quiet = 4 * fileSettle

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// configMapVolume lays out dir as kubelet does a ConfigMap volume: the
// file is a link through ..data, a link to a timestamped directory.
func configMapVolume(t *testing.T, dir, version, content string) {
	t.Helper()
	data := filepath.Join(dir, "..2026_11_21_"+version)
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(data, "config.yaml"), content)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(data), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "config.yaml")); err != nil {
		if err := os.Symlink("..data/config.yaml", filepath.Join(dir, "config.yaml")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFileWatcher(t *testing.T) {
	tests := []struct {
		name string
		// setup prepares dir before the watch starts and returns the
		// watched file's path.
		setup  func(t *testing.T, dir string) string
		change func(t *testing.T, path string)
		want   bool
	}{{
		name:   "written",
		setup:  existing,
		change: func(t *testing.T, path string) { write(t, path, "b") },
		want:   true,
	}, {
		name: "renamed over, as editors save",
		setup: func(t *testing.T, dir string) string {
			path := existing(t, dir)
			write(t, path+".swp", "b")
			return path
		},
		change: func(t *testing.T, path string) {
			if err := os.Rename(path+".swp", path); err != nil {
				t.Fatal(err)
			}
		},
		want: true,
	}, {
		name: "ConfigMap update",
		setup: func(t *testing.T, dir string) string {
			configMapVolume(t, dir, "1", "a")
			return filepath.Join(dir, "config.yaml")
		},
		change: func(t *testing.T, path string) {
			dir := filepath.Dir(path)
			configMapVolume(t, dir, "2", "b")
			if err := os.RemoveAll(filepath.Join(dir, "..2026_11_21_1")); err != nil {
				t.Fatal(err)
			}
		},
		want: true,
	}, {
		name:   "created after the watch began",
		setup:  func(t *testing.T, dir string) string { return filepath.Join(dir, "config.yaml") },
		change: func(t *testing.T, path string) { write(t, path, "a") },
		want:   true,
	}, {
		name:  "directory created after the watch began",
		setup: func(t *testing.T, dir string) string { return filepath.Join(dir, "etc/hwnet/config.yaml") },
		change: func(t *testing.T, path string) {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, path, "a")
		},
		want: true,
	}, {
		name:  "directory made again",
		setup: existing,
		change: func(t *testing.T, path string) {
			if err := os.RemoveAll(filepath.Dir(path)); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			write(t, path, "b")
		},
		want: true,
	}, {
		name:  "removed",
		setup: existing,
		change: func(t *testing.T, path string) {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		},
		want: true,
	}, {
		name:   "another file in the directory",
		setup:  existing,
		change: func(t *testing.T, path string) { write(t, filepath.Join(filepath.Dir(path), "other.yaml"), "b") },
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.setup(t, t.TempDir())
			w, err := WatchFile(path)
			if err != nil {
				t.Fatal(err)
			}
			changed := run(t, w.Run)
			tt.change(t, path)
			if tt.want {
				receive(t, changed)
			} else {
				expectNone(t, changed, quiet)
			}
		})
	}
}

// existing makes the watched file before the watch starts.
func existing(t *testing.T, dir string) string {
	path := filepath.Join(dir, "config.yaml")
	write(t, path, "a")
	return path
}

// TestFileWatcherBurst writes the file many times in a row: one change.
// A burst that a loaded machine stretches past fileSettle is not one
// burst, so it is tried again, a bounded number of times.
func TestFileWatcherBurst(t *testing.T) {
	path := existing(t, t.TempDir())
	w, err := WatchFile(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := run(t, w.Run)
	for try := 1; ; try++ {
		start := time.Now()
		for range 5 {
			write(t, path, "b")
		}
		if time.Since(start) <= fileSettle {
			break
		}
		if try == 5 {
			t.Fatalf("5 writes took longer than a burst lasts (%v) five times in a row", fileSettle)
		}
		drain(changed, quiet)
	}
	receive(t, changed)
	expectNone(t, changed, quiet)
}

// drain discards what ch delivers until it is quiet for d.
func drain[T any](ch <-chan T, d time.Duration) {
	for {
		select {
		case <-ch:
		case <-time.After(d):
			return
		}
	}
}

func TestFileWatcherClose(t *testing.T) {
	w, err := WatchFile(filepath.Join(t.TempDir(), "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Error(err)
	}
}
