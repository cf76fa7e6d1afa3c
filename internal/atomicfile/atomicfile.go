// Package atomicfile replaces files so that a reader sees the old content or
// the new, never part of either: a temporary file next to the target,
// renamed over it; and appends lines to a log so that a reader never sees
// part of one.
package atomicfile

import (
	"bytes"
	"errors"
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

// AppendLine appends line and a newline to the file at path with one
// write, making the file and its directory as needed, and syncs it: with
// O_APPEND the write lands whole at the end, so a reader in another
// process never sees half a line. Writers in one process serialise
// themselves.
func AppendLine(path string, line []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	return errors.Join(err, f.Sync(), f.Close())
}
