package ledger

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Fence withdraws devices from every front end while something changes
// them: a PF whose VF layout changes (the PF, its VFs, present and to
// come, and their ports), or the devices of a pool that changes front end.
// While it stands no Reserve of a device it covers succeeds.
type Fence struct {
	// Key names the fence and its owner; a second Fence with the same key
	// replaces the first.
	Key string
	// PF fences a PF with its VFs and their ports.
	PF string
	// Devices fences these device IDs or PCI addresses (all of a
	// function's ports).
	Devices []string
	// Reason says why, as refusals and hwnetctl devices show it.
	Reason string
	Since  time.Time
	// Layout, when set, is the VF layout change under way: the fence is
	// kept on disk until lifted, so that an agent that died half way
	// finds the PF still fenced and what to finish or undo.
	Layout *fenceapi.LayoutChange
}

func (f Fence) equal(o Fence) bool {
	return f.Key == o.Key && f.PF == o.PF && slices.Equal(f.Devices, o.Devices) && f.Reason == o.Reason
}

// covers reports whether the fence withdraws the device with this ID
// whose function's PF is pf ("" for a function that is no VF).
func (f Fence) covers(id, pf string) bool {
	fn := FunctionOf(id)
	if f.PF != "" && (fn == f.PF || pf == f.PF) {
		return true
	}
	return slices.Contains(f.Devices, id) || slices.Contains(f.Devices, fn)
}

// FunctionOf is the PCI address of a device ID: the ID itself, or for one
// port of a multi-port function (mlx4), "<PCI address>:p<port>", the
// address.
func FunctionOf(id string) string {
	if i := strings.LastIndex(id, ":p"); i > 0 {
		return id[:i]
	}
	return id
}

// Fenced is the first fence that withdraws the device, whose function's
// PF is pf ("" for no VF).
func (l *Ledger) Fenced(id, pf string) (Fence, bool) {
	if l == nil {
		return Fence{}, false
	}
	for _, f := range l.fences {
		if f.covers(id, pf) {
			return f, true
		}
	}
	return Fence{}, false
}

// Fences are the fences in force, by key.
func (l *Ledger) Fences() []Fence {
	if l == nil {
		return nil
	}
	return slices.Clone(l.fences)
}

// fenceFiles keeps a Book's durable fences, one file per fence.
type fenceFiles struct{ dir string }

func (d fenceFiles) path(key string) string { return filepath.Join(d.dir, fenceapi.FileName(key)) }

func (d fenceFiles) save(f Fence) error {
	if d.dir == "" {
		return errors.New("no fence directory: a VF layout change cannot be kept across a restart")
	}
	data, err := fenceapi.Encode(&fenceapi.Record{Key: f.Key, PF: f.PF, Reason: f.Reason, Since: f.Since.UTC(), Layout: f.Layout})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(d.dir, 0o700); err != nil {
		return fmt.Errorf("device fence %s: %w", f.Key, err)
	}
	if err := atomicfile.Write(d.path(f.Key), data, 0o600); err != nil {
		return fmt.Errorf("device fence %s: %w", f.Key, err)
	}
	return nil
}

func (d fenceFiles) remove(key string) error {
	if d.dir == "" {
		return nil
	}
	if err := os.Remove(d.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("device fence %s: %w", key, err)
	}
	return nil
}

// DefaultFenceDir is where the agent keeps its durable fences, and where
// hwnetctl reads them.
const DefaultFenceDir = "/var/lib/hwnet/fences"

// LoadFences reads the durable fences in dir; a missing directory holds
// none. A file that cannot be read is an error naming it: the PF it
// fences is not known.
func LoadFences(dir string) ([]Fence, error) {
	if dir == "" {
		return nil, nil
	}
	out, err := fileformat.LoadDir(dir, func(path string) (Fence, error) {
		r, err := fenceapi.Load(path)
		if err != nil {
			return Fence{}, err
		}
		return Fence{Key: r.Key, PF: r.PF, Reason: r.Reason, Since: r.Since, Layout: r.Layout}, nil
	})
	slices.SortFunc(out, func(a, b Fence) int { return strings.Compare(a.Key, b.Key) })
	return out, err
}
