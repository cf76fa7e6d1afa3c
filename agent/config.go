package agent

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/node/pools"
)

// readConfig reads and checks a pool configuration, models included, and
// returns it with the bytes it was read from.
func readConfig(path string, db *hwdb.DB) (*pools.Config, []byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pools.Parse(data)
	if err != nil {
		return nil, nil, fmt.Errorf("config %s: %w", path, err)
	}
	if err := cfg.CheckModels(db); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, data, nil
}

// startConfig is the configuration the agent starts with: the file's, or,
// when the file is invalid, the last good one, so that a bad ConfigMap and
// any restart do not take the node's pools away. rejected says why the
// file was not taken.
func startConfig(opts Options, db *hwdb.DB) (cfg *pools.Config, rejected, err error) {
	cfg, data, err := readConfig(opts.ConfigFile, db)
	if err == nil {
		return cfg, nil, keepLastGood(opts.LastGoodConfig, data)
	}
	if opts.LastGoodConfig == "" {
		return nil, nil, err
	}
	good, _, lerr := readConfig(opts.LastGoodConfig, db)
	if lerr != nil {
		return nil, nil, errors.Join(err, fmt.Errorf("no last good configuration to fall back to: %w", lerr))
	}
	return good, err, nil
}

// keepLastGood stores an accepted configuration's bytes for the next
// start; unchanged content is not rewritten.
func keepLastGood(path string, data []byte) error {
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

// setRejected records why the configuration file is not the one served,
// for /readyz and the node's Events; nil clears it.
func (a *Agent) setRejected(err error) {
	if err == nil {
		a.rejected.Store(nil)
		return
	}
	msg := err.Error()
	a.rejected.Store(&msg)
	a.events.configRejected(a.opts.ConfigFile, msg)
}
