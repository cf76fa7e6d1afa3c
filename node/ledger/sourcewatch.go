package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hwnet-io/hwnet/node/watch"
)

// sourceWatch follows, through inotify, the directories in which another
// process changes a source without telling the agent: the CNI records
// (the shim's DEL while the agent is away), the device-info files, and
// every DRA checkpoint (one in each driver's directory under kubelet's
// plugins directory, and the running driver's). While all of them are
// watched, an idle Watch polls only when kubelet's answer goes stale,
// where it polled every idlePoll before: on a 2 vCPU AMD EPYC the
// ledger's 30 s poll was four of the idle agent's twenty wake-ups in two
// minutes, each with some hundred system calls.
type sourceWatch struct {
	src Sources
	// changed is signalled after each event, and whenever a watch
	// (re)starts or ends: a change may have gone unseen.
	changed chan struct{}
	// watched says every source directory is watched now.
	watched atomic.Bool
}

func newSourceWatch(src Sources) *sourceWatch {
	return &sourceWatch{src: src, changed: make(chan struct{}, 1)}
}

// run watches until ctx ends. A watch that cannot be made, or ends, is
// made again after idlePoll, during which the Watch polls every idlePoll.
func (s *sourceWatch) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := s.watchOnce(ctx)
		s.watched.Store(false)
		signal(s.changed)
		if err == nil {
			continue // the plugins directory's entries changed: watch them
		}
		select {
		case <-ctx.Done():
		case <-time.After(idlePoll):
		}
	}
}

// watchOnce watches the source directories until ctx ends (nil), an
// entry of the plugins directory comes or goes (nil: the set of
// directories changed), or a watch cannot be made or ends (an error).
func (s *sourceWatch) watchOnce(ctx context.Context) error {
	dirs := s.dirs()
	if len(dirs) == 0 {
		return errors.New("no source directory to watch")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := make(chan watch.SocketEvent, 1)
	ended, err := watch.WatchAll(ctx, entries(dirs, watch.Visible), events, nil)
	if err != nil {
		return err
	}
	defer func() { cancel(); <-ended }()
	// The plugins directory's entries are the drivers' directories: a
	// new one is watched too. nil channels, without one, never fire.
	var top chan watch.SocketEvent
	var topEnded <-chan struct{}
	if s.src.PluginsDir != "" {
		top = make(chan watch.SocketEvent, 1)
		if topEnded, err = watch.WatchAll(ctx, entries([]string{s.src.PluginsDir}, nil), top, nil); err != nil {
			return err
		}
		defer func() { cancel(); <-topEnded }()
	}
	s.watched.Store(true)
	signal(s.changed) // what changed before the watch began
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-events:
			signal(s.changed)
		case <-top:
			return nil
		case <-ended:
			return errors.New("a source directory's watch ended")
		case <-topEnded:
			return errors.New("the plugins directory's watch ended")
		}
	}
}

// dirs are the directories watched: the records', the device-info
// files', every directory under kubelet's plugins directory (a driver's
// checkpoint is written there, under any name) and the running driver's.
// A directory that does not exist yet is watched until it appears.
func (s *sourceWatch) dirs() []string {
	var dirs []string
	if s.src.Records != nil {
		if d := s.src.Records.RecordsDir(); d != "" {
			dirs = append(dirs, d)
		}
	}
	if s.src.DevinfoDir != "" {
		dirs = append(dirs, s.src.DevinfoDir)
	}
	if s.src.PluginsDir != "" {
		list, _ := os.ReadDir(s.src.PluginsDir) // missing: none yet
		for _, e := range list {
			if e.IsDir() {
				dirs = append(dirs, filepath.Join(s.src.PluginsDir, e.Name()))
			}
		}
	}
	if s.src.Checkpoint != "" {
		dirs = append(dirs, filepath.Dir(filepath.Clean(s.src.Checkpoint)))
	}
	slices.Sort(dirs)
	return slices.Compact(dirs)
}

// entries watches the entries of each directory that match, every one
// for a nil match. A source's files are replaced through hidden
// temporaries (watch.Visible): theirs are left out, the file renamed
// over is reported written.
func entries(dirs []string, match func(name string) bool) []watch.Entries {
	out := make([]watch.Entries, len(dirs))
	for i, d := range dirs {
		out[i] = watch.Entries{Dir: d, Match: match}
	}
	return out
}

// signal sends on c without blocking.
func signal(c chan<- struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
