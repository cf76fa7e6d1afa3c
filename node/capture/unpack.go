package capture

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hwnet-io/hwnet/api/capture"
)

// Unpack writes c's tree into dir, which must be empty or absent:
// dir/sys for --sysfs and dir/dev for --dev, as a tree-only virtual node
// has them. c is validated first, so nothing is written outside dir, and
// nothing at all if an entry is bad.
func Unpack(c *capture.Capture, dir string) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("unpack: %w", err)
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("unpack: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpack: %w", err)
	}
	for _, d := range []string{"sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("unpack: %w", err)
		}
	}
	for _, e := range c.Entries {
		if err := unpackEntry(dir, e); err != nil {
			return fmt.Errorf("unpack %s: %w", e.Path, err)
		}
	}
	return nil
}

func unpackEntry(dir string, e capture.Entry) error {
	p := filepath.Join(dir, filepath.FromSlash(e.Path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	switch e.Kind {
	case capture.Dir:
		return os.MkdirAll(p, 0o755)
	case capture.File:
		return os.WriteFile(p, []byte(e.Data), 0o644)
	case capture.Device:
		return os.WriteFile(p, nil, 0o644)
	case capture.Link:
		return os.Symlink(filepath.FromSlash(e.Target), p)
	}
	return fmt.Errorf("kind %q", e.Kind)
}
