//lint:file-ignore ST1005 File's errors start with its Go field's name (Path, Mode, Source); Spec prefixes them with "Files[i]."

package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// layerEntry is one member of the layer tar: a directory (name ends in
// "/") or a regular file whose content is data or the host file source.
type layerEntry struct {
	name   string // relative to the image root, as docker layers name them
	mode   fs.FileMode
	data   []byte
	source string
	size   int64
}

// layerEntries validates s and returns its layer's members sorted by name,
// each file preceded by its parent directories.
func (s Spec) layerEntries() ([]layerEntry, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	byPath := make(map[string]int, len(s.Files))
	for i, f := range s.Files {
		if err := f.validate(); err != nil {
			return nil, fmt.Errorf("image spec %s: Files[%d].%w", s.Ref, i, err)
		}
		if j, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("image spec %s: Files[%d].Path %q: duplicates Files[%d]", s.Ref, i, f.Path, j)
		}
		byPath[f.Path] = i
	}
	dirs := map[string]bool{}
	var entries []layerEntry
	for i, f := range s.Files {
		for dir := path.Dir(f.Path); dir != "/"; dir = path.Dir(dir) {
			if j, isFile := byPath[dir]; isFile {
				return nil, fmt.Errorf("image spec %s: Files[%d].Path %q: its directory %q is Files[%d], a file", s.Ref, i, f.Path, dir, j)
			}
			if !dirs[dir] {
				dirs[dir] = true
				entries = append(entries, layerEntry{name: dir[1:] + "/", mode: 0o755})
			}
		}
		entry, err := f.layerEntry()
		if err != nil {
			return nil, fmt.Errorf("image spec %s: Files[%d].%w", s.Ref, i, err)
		}
		entries = append(entries, entry)
	}
	slices.SortFunc(entries, func(a, b layerEntry) int { return strings.Compare(a.name, b.name) })
	return entries, nil
}

func (s Spec) validate() error {
	if s.Ref == "" || strings.ContainsFunc(s.Ref, isSpaceOrControl) {
		return fmt.Errorf("image spec: Ref %q: want a non-empty image reference without spaces", s.Ref)
	}
	for i, kv := range s.Env {
		if key, _, ok := strings.Cut(kv, "="); !ok || key == "" {
			return fmt.Errorf("image spec %s: Env[%d] %q: want KEY=VALUE", s.Ref, i, kv)
		}
	}
	return nil
}

func isSpaceOrControl(r rune) bool { return r <= ' ' || r == 0x7f }

// validate checks f on its own; its errors start with the field's name.
func (f File) validate() error {
	switch {
	case !strings.HasPrefix(f.Path, "/"):
		return fmt.Errorf("Path %q: not absolute", f.Path)
	case strings.ContainsRune(f.Path, 0):
		return fmt.Errorf("Path %q: contains NUL", f.Path)
	case f.Path == "/":
		return fmt.Errorf("Path %q: the root directory is not a file", f.Path)
	case path.Clean(f.Path) != f.Path:
		return fmt.Errorf("Path %q: not clean (want %q)", f.Path, path.Clean(f.Path))
	case f.Mode&^fs.ModePerm != 0:
		return fmt.Errorf("Mode %v: only permission bits (0o777) are allowed", f.Mode)
	case f.Source != "" && f.Data != nil:
		return fmt.Errorf("Source %q: set together with Data; want one of them", f.Source)
	}
	return nil
}

func (f File) layerEntry() (layerEntry, error) {
	entry := layerEntry{name: f.Path[1:], mode: f.Mode, data: f.Data, size: int64(len(f.Data))}
	if f.Source == "" {
		return entry, nil
	}
	info, err := os.Stat(f.Source)
	if err != nil {
		return layerEntry{}, fmt.Errorf("Source %q: %w", f.Source, err)
	}
	if !info.Mode().IsRegular() {
		return layerEntry{}, fmt.Errorf("Source %q: not a regular file (%v)", f.Source, info.Mode().Type())
	}
	entry.source, entry.size = f.Source, info.Size()
	return entry, nil
}

// measureLayer returns the sha256 (hex) and size of the layer tar: the
// archive's headers need both before the layer itself.
func measureLayer(entries []layerEntry) (string, int64, error) {
	hash := sha256.New()
	counter := &countingWriter{w: hash}
	if err := writeLayer(counter, entries); err != nil {
		return "", 0, fmt.Errorf("layer: %w", err)
	}
	return hex.EncodeToString(hash.Sum(nil)), counter.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeLayer(w io.Writer, entries []layerEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if err := writeEntry(tw, e); err != nil {
			return fmt.Errorf("/%s: %w", strings.TrimSuffix(e.name, "/"), err)
		}
	}
	return tw.Close()
}

func writeEntry(tw *tar.Writer, e layerEntry) error {
	if strings.HasSuffix(e.name, "/") {
		return tw.WriteHeader(dirHeader(e.name))
	}
	if err := tw.WriteHeader(regularHeader(e.name, e.mode, e.size)); err != nil {
		return err
	}
	if e.source == "" {
		_, err := tw.Write(e.data)
		return err
	}
	f, err := os.Open(e.source)
	if err != nil {
		return err
	}
	defer f.Close()
	// Exactly the size the header announced: a Source that shrank fails
	// here, one that grew is caught by the digest check.
	if _, err := io.CopyN(tw, f, e.size); err != nil {
		return fmt.Errorf("copy %s: %w", e.source, err)
	}
	return nil
}

// Headers carry a fixed time and owner so that identical inputs give
// identical bytes.
func dirHeader(name string) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: time.Unix(0, 0)}
}

func regularHeader(name string, mode fs.FileMode, size int64) *tar.Header {
	return &tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: int64(mode), Size: size, ModTime: time.Unix(0, 0)}
}
