package dirent

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNames lists directories small and larger than one getdents buffer
// exactly, "." and ".." aside.
func TestNames(t *testing.T) {
	for _, n := range []int{0, 3, 500} {
		dir := t.TempDir()
		var want []string
		for i := range n {
			name := "virtfn" + strconv.Itoa(i) + "-with-a-long-enough-name"
			want = append(want, name)
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			t.Fatal(err)
		}
		var r Reader
		got, err := r.Names(fd)
		unix.Close(fd)
		slices.Sort(got)
		slices.Sort(want)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%d entries: got %d (%v), want %d", n, len(got), err, len(want))
		}
	}
}

// FuzzWalk: no buffer may panic, read past its end or give an empty name.
func FuzzWalk(f *testing.F) {
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x18\x00\x04eth0\x00\x00\x00\x00\x00"))
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x18\x00\x04\x00eth0\x00\x00\x00\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		Walk(b, func(name []byte) {
			if len(name) == 0 || len(name) > len(b) {
				t.Errorf("Walk(%q) gave name %q", b, name)
			}
		})
	})
}
