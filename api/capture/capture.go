// Package capture is the file hwnetctl capture writes: the parts of a
// node's sysfs and /dev that hwnet reads, with MAC addresses, GUIDs and
// serial numbers replaced, so that a user's NIC layout can be unpacked
// into a tree that discovery, hwnetctl and the tests read as they read a
// virtual node's.
//
// Versions:
//
//   - 1 (current): the kernel release, when it was taken, and the tree's
//     entries (directories, files with their content, symlinks, device
//     nodes), each under sys/ or dev/.
package capture

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Version is the format this hwnet writes.
const Version = 1

// Limits a capture is held to: a node with 4 PFs of 256 VFs takes some
// 40,000 entries and 8 MiB.
const (
	MaxSize     = 64 << 20
	MaxEntries  = 200_000
	MaxFileData = 64 << 10
	MaxPath     = 1024
)

// Kinds of entries.
const (
	Dir  = "dir"
	File = "file"
	Link = "link"
	// Device is a device node, unpacked as an empty file: discovery only
	// asks whether it is there.
	Device = "dev"
)

func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "hwnet capture", Current: Version, MaxSize: MaxSize}
}

// Capture is one node's snapshot.
type Capture struct {
	// Kernel is the node's kernel release (uname -r).
	Kernel string `json:"kernel,omitempty"`
	// Taken is when it was taken.
	Taken time.Time `json:"taken"`
	// Entries are the tree's, parents before their entries.
	Entries []Entry `json:"entries"`
}

// Entry is one directory, file, symlink or device node.
type Entry struct {
	// Path is relative, under sys/ or dev/: "sys/bus/pci/devices/0000:3b:00.0".
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Data is a file's content.
	Data string `json:"data,omitempty"`
	// Target is a symlink's, relative, and stays inside the tree.
	Target string `json:"target,omitempty"`
}

// Validate checks every entry: a known kind, a clean relative path under
// sys/ or dev/, none below a symlink, a link whose clean target stays
// inside the tree, the size limits. An unpacked capture can then neither
// write nor lead outside its directory.
func (c *Capture) Validate() error {
	if len(c.Entries) > MaxEntries {
		return fmt.Errorf("entries: %d, more than %d", len(c.Entries), MaxEntries)
	}
	links := map[string]bool{}
	kinds := make(map[string]string, len(c.Entries))
	for i, e := range c.Entries {
		if err := e.validate(); err != nil {
			return fmt.Errorf("entries[%d] %q: %w", i, e.Path, err)
		}
		if k, dup := kinds[e.Path]; dup {
			return fmt.Errorf("entries[%d] %q: a second entry (the first a %s)", i, e.Path, k)
		}
		kinds[e.Path] = e.Kind
		if e.Kind == Link {
			links[e.Path] = true
		}
	}
	for i, e := range c.Entries {
		for d := path.Dir(e.Path); d != "."; d = path.Dir(d) {
			if k := kinds[d]; links[d] || k == File || k == Device {
				return fmt.Errorf("entries[%d] %q: below %q, not a directory", i, e.Path, d)
			}
		}
	}
	return nil
}

func (e Entry) validate() error {
	if err := checkPath(e.Path); err != nil {
		return fmt.Errorf("path: %w", err)
	}
	switch e.Kind {
	case Dir, Device:
	case File:
		if len(e.Data) > MaxFileData {
			return fmt.Errorf("data: %d bytes, more than %d", len(e.Data), MaxFileData)
		}
	case Link:
		// A target's ".." must all lead: one after a name that is itself
		// a link would climb from wherever that link leads.
		if e.Target == "" || path.IsAbs(e.Target) || path.Clean(e.Target) != e.Target {
			return fmt.Errorf("target %q: want a clean relative path", e.Target)
		}
		if err := checkPath(path.Join(path.Dir(e.Path), e.Target)); err != nil {
			return fmt.Errorf("target %q: %w", e.Target, err)
		}
	default:
		return fmt.Errorf("kind %q: want dir, file, link or dev", e.Kind)
	}
	return nil
}

// checkPath accepts a clean relative path under sys/ or dev/.
func checkPath(p string) error {
	switch {
	case len(p) > MaxPath:
		return fmt.Errorf("%d bytes, more than %d", len(p), MaxPath)
	case path.Clean(p) != p || path.IsAbs(p) || strings.HasPrefix(p, "../") || p == "..":
		return errors.New("not a clean relative path inside the capture")
	case strings.ContainsRune(p, 0):
		return errors.New("a NUL")
	case !strings.HasPrefix(p, "sys/") && !strings.HasPrefix(p, "dev/"):
		return errors.New("not under sys/ or dev/")
	}
	return nil
}

// Encode is the capture's file content in the current version.
func Encode(c *Capture) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("hwnet capture: %w", err)
	}
	file := struct {
		Version int      `json:"version"`
		Capture *Capture `json:"capture"`
	}{Version, c}
	return json.MarshalIndent(&file, "", " ")
}

// Load reads the capture file at path; its errors name the file.
func Load(path string) (*Capture, error) {
	return fileformat.Load(fileFormat(), path, Decode)
}

// Decode reads a capture of this version; an entry it cannot vouch for
// fails it whole.
func Decode(data []byte) (*Capture, error) {
	c, err := fileformat.Decode(fileFormat(), data, fileformat.Decoders[*Capture]{
		Older: noSuchVersion, Same: decodeCurrent, Newer: noSuchVersion,
	})
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("hwnet capture: %w: %w", fileformat.ErrMalformed, err)
	}
	return c, nil
}

func noSuchVersion([]byte, fileformat.Header) (*Capture, error) {
	return nil, fmt.Errorf("no such version: this hwnet reads version %d", Version)
}

func decodeCurrent(object []byte, _ fileformat.Header) (*Capture, error) {
	payload, err := fileformat.Payload(object, "capture")
	if err != nil {
		return nil, err
	}
	var c Capture
	if err := json.Unmarshal(payload, &c); err != nil {
		return nil, fmt.Errorf("%w: capture: %w", fileformat.ErrMalformed, err)
	}
	return &c, nil
}
