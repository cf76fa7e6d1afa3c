package fileformat_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// TestLoadDirSkipsRemoved: a file removed between the listing and its
// load, as the agent removes a fence or a done reset while hwnetctl or a
// second reader lists the directory, is not there; any other failure is
// an error. (The hand-out soak's reader met the removal at seed 21000299.)
func TestLoadDirSkipsRemoved(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.json", "b.json", "c.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	load := func(path string) (string, error) {
		if filepath.Base(path) == "a.json" {
			// Removed by someone else once listed.
			if err := os.Remove(filepath.Join(dir, "b.json")); err != nil {
				t.Fatal(err)
			}
		}
		data, err := os.ReadFile(path)
		return string(data), err
	}
	got, err := fileformat.LoadDir(dir, load)
	if err != nil || !slices.Equal(got, []string{"a.json", "c.json"}) {
		t.Errorf("LoadDir = %v, %v; want [a.json c.json]", got, err)
	}
	if err := os.Chmod(filepath.Join(dir, "c.json"), 0); err != nil {
		t.Fatal(err)
	}
	unreadable := func(path string) (string, error) {
		if filepath.Base(path) == "c.json" {
			return "", os.ErrPermission
		}
		return "", nil
	}
	if _, err := fileformat.LoadDir(dir, unreadable); err == nil {
		t.Error("an unreadable file was skipped, want an error")
	}
}
