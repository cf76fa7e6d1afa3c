// Package atomicfile replaces files so that a reader sees the old content or
// the new, never part of either: a temporary file next to the target,
// renamed over it.
package atomicfile

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
)

// Write writes data to path with permissions perm, atomically. The parent
// directory must exist: its permissions are the caller's to choose. It does
// not fsync: callers that need durability across power loss must say so.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil && perm != 0o600 { // CreateTemp's mode
		err = tmp.Chmod(perm)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// Replace is Write, skipped when path already holds exactly data; it
// reports whether it wrote. Files watched by others (a runtime's CNI
// directory) then change only when their content does.
func Replace(path string, data []byte, perm fs.FileMode) (bool, error) {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return false, nil
	}
	return true, Write(path, data, perm)
}
