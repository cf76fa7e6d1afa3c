package pools

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// ReadChecked reads and checks a pool configuration, models included, and
// returns it with the bytes it was read from, which KeepLastGood stores.
func ReadChecked(path string, db *hwdb.DB) (*Config, []byte, error) {
	cfg, data, err := load(path)
	if err != nil {
		return nil, nil, err
	}
	if err := cfg.CheckModels(db); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, data, nil
}

// StartConfig is the configuration an agent starts with: file's, or, when file
// is invalid, the last good one kept at lastGood, so that a bad ConfigMap
// and any restart do not take the node's pools away. rejected says why
// file was not taken. lastGood "" keeps no copy and falls back to none.
func StartConfig(file, lastGood string, db *hwdb.DB) (cfg *Config, rejected, err error) {
	cfg, data, err := ReadChecked(file, db)
	if err == nil {
		return cfg, nil, KeepLastGood(lastGood, data)
	}
	if lastGood == "" {
		return nil, nil, err
	}
	good, _, lerr := ReadChecked(lastGood, db)
	if lerr != nil {
		return nil, nil, errors.Join(err, fmt.Errorf("no last good configuration to fall back to: %w", lerr))
	}
	return good, err, nil
}

// KeepLastGood stores an accepted configuration's bytes at path for the
// next start; unchanged content is not rewritten, and "" keeps nothing.
func KeepLastGood(path string, data []byte) error {
	if path == "" {
		return nil
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := atomicfile.Write(path, data, 0o644); err != nil {
		return fmt.Errorf("keeping the last good configuration: %w", err)
	}
	return nil
}
