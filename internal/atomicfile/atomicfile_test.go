package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteAndReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f.conf")
	if err := Write(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("stat = %v, %v; want mode 0644", st, err)
	}
	if changed, err := Replace(path, []byte("one"), 0o644); err != nil || changed {
		t.Fatalf("Replace with the same content = %v, %v; want no write", changed, err)
	}
	if changed, err := Replace(path, []byte("two"), 0o755); err != nil || !changed {
		t.Fatalf("Replace with new content = %v, %v; want a write", changed, err)
	}
	got, _ := os.ReadFile(path)
	st, _ = os.Stat(path)
	if string(got) != "two" || st.Mode().Perm() != 0o755 {
		t.Fatalf("file = %q mode %v, want \"two\" 0755", got, st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("directory holds %d entries, want the file alone (no temporary left)", len(entries))
	}
}

func TestWriteNeedsItsDirectory(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "missing", "x"), []byte("x"), 0o644); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

// TestAppendLine: lines land whole, in order, each ended by a newline, in
// a file made with its directory.
func TestAppendLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dir", "log.jsonl")
	for _, line := range []string{`{"a":1}`, `{"b":2}`} {
		if err := AppendLine(path, []byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "{\"a\":1}\n{\"b\":2}\n" {
		t.Fatalf("log = %q, %v", got, err)
	}
}
