package dra

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"

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
// are serialized by the DRA library, so each takes, changes and saves.
// What a call saved is kept for the next one, and for the device
// ledger's views, while the file stays as it was written: decoding the
// whole checkpoint cost 5.4-6.7 ms with 100 claims of 4 devices prepared
// (in process, 2 vCPU AMD EPYC), and a call adds or removes one claim.
type checkpointStore struct {
	path string
	log  *slog.Logger
	mu   sync.Mutex
	// kept is the checkpoint last saved while the file is the one saved
	// (keptAs). It is never changed: a call takes a copy of its claims
	// map, and replaces a claim it changes (claimCopy).
	kept   *checkpoint.Checkpoint
	keptAs fileID
	// enc encodes every save into buffers it reuses, the kept claims
	// as saveAndKeep encoded them; encodeMu serializes the saves.
	encodeMu sync.Mutex
	enc      checkpoint.Encoder
}

// fileID tells a file apart from the one written before it: each save
// renames a new file over the last.
type fileID struct {
	ino, size, mtime int64
}

// idOf is the file's ID, false if it cannot be stat'ed.
func idOf(path string) (fileID, bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{ino: int64(st.Ino), size: fi.Size(), mtime: fi.ModTime().UnixNano()}, true
}

// take is the checkpoint for a kubelet call to change and save: the one
// the last call saved (saveAndKeep) if the file is still that one, else
// the file read afresh. The kept one stays what views read until the
// call saves: a view while the call is under way read and decoded the
// whole file, at 100 claims of 4 devices several times a second, each
// 5 ms of CPU. So the call gets its own claims map, whose claims are the
// kept checkpoint's: it must replace a claim it changes with a
// claimCopy, never change one in place.
func (s *checkpointStore) take() (*checkpoint.Checkpoint, error) {
	s.mu.Lock()
	kept := s.currentLocked()
	s.mu.Unlock()
	if kept == nil {
		return s.load()
	}
	taken := *kept
	taken.Claims = maps.Clone(kept.Claims)
	return &taken, nil
}

// claimCopy is pc with pods, devices and VF records of its own, for a
// call to change: pc may be the kept checkpoint's, which views read
// meanwhile.
func claimCopy(pc *checkpoint.Claim) *checkpoint.Claim {
	c := *pc
	c.Pods = slices.Clone(pc.Pods)
	c.Devices = slices.Clone(pc.Devices)
	for i, d := range c.Devices {
		if d.VF != nil {
			vf := *d.VF
			c.Devices[i].VF = &vf
		}
	}
	return &c
}

// currentLocked is the kept checkpoint while the file is still the one
// it was saved as, else nil; s.mu is held.
func (s *checkpointStore) currentLocked() *checkpoint.Checkpoint {
	if id, ok := idOf(s.path); s.kept != nil && ok && id == s.keptAs {
		return s.kept
	}
	return nil
}

// view calls read with the checkpoint the file holds: the one kept
// while the file is still it, a kubelet call under way or not, else the
// file read afresh. read must neither change the
// checkpoint nor keep anything of it past its return.
func (s *checkpointStore) view(read func(*checkpoint.Checkpoint)) error {
	s.mu.Lock()
	if kept := s.currentLocked(); kept != nil {
		defer s.mu.Unlock()
		read(kept)
		return nil
	}
	s.mu.Unlock()
	cp, err := s.load()
	if err != nil {
		return err
	}
	read(cp)
	return nil
}

// ViewCheckpoint calls read with the driver's checkpoint as it is kept
// between kubelet's calls while the file is the one saved, else as the
// file holds it (the device ledger's Sources.ViewCheckpoint). read must
// neither change it nor keep anything of it.
func (d *Driver) ViewCheckpoint(read func(*checkpoint.Checkpoint)) error {
	return d.store.view(read)
}

// load reads the checkpoint file, an empty checkpoint if there is none
// yet.
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

// save writes cp to the file in the middle of a change: a claim of the
// kept checkpoint is written as saveAndKeep encoded it (its claims are
// never changed, only replaced), the others are encoded.
func (s *checkpointStore) save(cp *checkpoint.Checkpoint) error {
	return s.write(cp, false)
}

// write writes cp to the file through the store's encoder; with keep,
// cp's claims are the encoder's kept ones from now on.
func (s *checkpointStore) write(cp *checkpoint.Checkpoint, keep bool) error {
	s.encodeMu.Lock()
	defer s.encodeMu.Unlock()
	data, err := s.enc.Encode(cp, keep)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(s.path, data, 0o600); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

// saveAndKeep is save, cp then kept for the next kubelet call: only at
// the end of one, once cp changes no more. A later save by anyone else
// (at the driver's start, in the middle of a call) writes another file,
// and the next call reads that. A call adds, replaces or removes a claim
// or two: the others are written as this save encoded them
// (checkpoint.Encoder).
func (s *checkpointStore) saveAndKeep(cp *checkpoint.Checkpoint) error {
	if err := s.write(cp, true); err != nil {
		return err
	}
	id, ok := idOf(s.path)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept, s.keptAs = cp, id
	return nil
}
