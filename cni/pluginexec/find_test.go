package pluginexec

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
)

// Exec stands in for libcni's executor wherever one is taken.
var _ invoke.Exec = (*Exec)(nil)

// TestFindInPathAsLibcni holds FindInPath to libcni's answer, path and
// error text alike, for every case its code distinguishes.
func TestFindInPathAsLibcni(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	for _, f := range []string{filepath.Join(first, "both"), filepath.Join(second, "both"), filepath.Join(second, "later")} {
		if err := os.WriteFile(f, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(first, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		plugin string
		paths  []string
	}{
		{"first directory wins", "both", []string{first, second}},
		{"found in a later directory", "later", []string{first, second}},
		{"a directory is no plugin", "adir", []string{first}},
		{"missing", "none", []string{first, second}},
		{"no name", "", []string{first}},
		{"a path, not a name", "../both", []string{first}},
		{"no paths", "both", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, wantErr := invoke.FindInPath(tc.plugin, tc.paths)
			got, err := New(nil).FindInPath(tc.plugin, tc.paths)
			if got != want || (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
				t.Errorf("FindInPath(%q, %v) = %q, %v; libcni: %q, %v", tc.plugin, tc.paths, got, err, want, wantErr)
			}
		})
	}
}
