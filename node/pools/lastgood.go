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

// Started is the configuration an agent starts with, and what became of
// the file it was asked to serve.
type Started struct {
	Config *Config
	// Rejected says why the file was not taken; nil when it was.
	Rejected error
	// Unkept says why the file, taken, could not be kept as the last good
	// copy; nil when it was. The file is served all the same.
	Unkept error
}

// StartConfig is the configuration an agent starts with: file's, or, when file
// is invalid, the last good one kept at lastGood, so that a bad ConfigMap
// and any restart do not take the node's pools away. lastGood "" keeps no
// copy and falls back to none. A copy that cannot be written is no reason
// to serve nothing (Started.Unkept): only a configuration that cannot be
// had at all is an error.
func StartConfig(file, lastGood string, db *hwdb.DB) (Started, error) {
	cfg, data, err := ReadChecked(file, db)
	if err == nil {
		return Started{Config: cfg, Unkept: KeepLastGood(lastGood, data)}, nil
	}
	if lastGood == "" {
		return Started{}, err
	}
	good, _, lerr := ReadChecked(lastGood, db)
	if lerr != nil {
		return Started{}, errors.Join(err, fmt.Errorf("no last good configuration to fall back to: %w", lerr))
	}
	return Started{Config: good, Rejected: err}, nil
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
