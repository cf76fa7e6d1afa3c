package virtualnode

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/node/devlink"
)

// EnactDevlinkRecord does what mlx5 does for the SF port adds and dels an
// agent keeps in the devlink record at path (hwnet-agent
// --devlink=record:PATH, devlink.Record), the node's PFs having no
// devlink: after each write to the record (and once at the start) each
// PF's SFs are brought to what the record's last add or del of each sfnum
// says (AddSF, DeleteSF); an SF the record never names stays as built. The
// record's eSwitch modes need no enacting: the representors are always
// there. A change the emulation refuses, as mlx5 would, is logged; the
// agent sees the SF not come or go. After the SFs change, dev (unless
// "") mirrors the node's device files, as in EnactWritesInto.
//
// It runs until ctx is done, calling ready (if not nil) once it watches;
// the record's directory is made if missing.
func (n *Node) EnactDevlinkRecord(ctx context.Context, log *slog.Logger, path, dev string, ready func()) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("devlink record: %w", err)
	}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return fmt.Errorf("devlink record: inotify: %w", err)
	}
	f := os.NewFile(uintptr(fd), "inotify")
	defer f.Close()
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO); err != nil {
		return fmt.Errorf("devlink record: watch %s: %w", dir, err)
	}
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	if ready != nil {
		ready()
	}
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n.enactRecord(ctx, log, path, dev)
		if err := awaitWrite(f, buf, filepath.Base(path)); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("devlink record: %w", err)
		}
	}
}

// awaitWrite reads inotify events until one names the file.
func awaitWrite(f *os.File, buf []byte, name string) error {
	for {
		got, err := f.Read(buf)
		if err != nil {
			return err
		}
		for _, evName := range inotifyEvents(buf[:got]) {
			if evName == name {
				return nil
			}
		}
	}
}

// enactRecord brings each PF's SFs to what the record says, logging what
// cannot be read or enacted.
func (n *Node) enactRecord(ctx context.Context, log *slog.Logger, path, dev string) {
	sets, err := devlink.ReadSets(path)
	if err != nil {
		log.Warn("devlink record not enacted", "err", err)
		return
	}
	changed := false
	folded := devlink.Fold(sets)
	for _, pf := range slices.Sorted(maps.Keys(folded)) {
		for _, num := range slices.Sorted(maps.Keys(folded[pf].SFs)) {
			did, err := n.enactSF(ctx, pf, num, folded[pf].SFs[num])
			if err != nil {
				log.Warn("mlx5 would have failed this devlink port change", "pf", pf, "sfnum", num, "err", err)
			}
			changed = changed || did
		}
	}
	if changed && dev != "" {
		if err := n.MirrorDevices(dev); err != nil {
			log.Warn("device files not mirrored", "dev", dev, "err", err)
		}
	}
}

// enactSF adds or deletes the PF's SF sfnum unless it is there, or gone,
// already; it says whether it changed the node.
func (n *Node) enactSF(ctx context.Context, pf string, sfnum int, present bool) (bool, error) {
	f, ok := n.Device(pf)
	if !ok {
		return false, fmt.Errorf("no PCI function %s (ENODEV)", pf)
	}
	has := slices.ContainsFunc(f.SFs, func(sf *SF) bool { return sf.Num == sfnum })
	switch {
	case present == has:
		return false, nil
	case present:
		return true, n.AddSF(ctx, pf, sfnum)
	}
	return true, n.DeleteSF(ctx, pf, sfnum)
}
