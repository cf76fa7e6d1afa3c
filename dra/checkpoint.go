package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// checkpointFile, in the plugin directory, records every prepared claim:
// kubelet's unprepare names only the claim, which may be gone from the API
// server, and the agent may have restarted since it prepared it. Its
// format is package api/dra/checkpoint.
const checkpointFile = "checkpoint.json"

// CheckpointPath is the driver's checkpoint file, which the device ledger
// reads: pluginDir "" is the driver's default directory.
func CheckpointPath(driverName, pluginDir string) string {
	return Options{DriverName: driverName, PluginDir: pluginDir}.withDefaults().checkpointPath()
}

// checkpointPath is the checkpoint file of a driver with these options.
func (o Options) checkpointPath() string { return filepath.Join(o.PluginDir, checkpointFile) }

// checkpointStore reads and writes the checkpoint file. Kubelet's calls
// are serialized by the DRA library, so each loads, changes and saves.
type checkpointStore struct {
	path string
	log  *slog.Logger
}

// load reads the checkpoint, an empty one if there is none yet.
func (s *checkpointStore) load() (*checkpoint.Checkpoint, error) {
	cp, err := checkpoint.Load(s.path)
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint.New(), nil
	}
	if err != nil {
		return nil, err
	}
	if cp.Version > checkpoint.Version {
		s.log.Warn("checkpoint written by a newer hwnet: read the fields this one knows, the next change writes it in this version",
			"path", s.path, "version", cp.Version, "supported", checkpoint.Version)
	}
	return cp, nil
}

func (s *checkpointStore) save(cp *checkpoint.Checkpoint) error {
	data, err := checkpoint.Encode(cp)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}
