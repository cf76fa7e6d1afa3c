// Package readiness writes hwnet's CNI configuration for the container
// runtime once the cluster-wide default network is configured, and takes it
// back when that configuration goes (NPWG 6.1): until then kubelet reports
// the node's network as not ready and schedules no pod to fail on it.
package readiness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	cniversion "github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/node/watch"
)

// Options configure a Writer.
type Options struct {
	// ConfDir holds the cluster-wide default network's configuration.
	ConfDir string
	// OutputDir is the runtime's configuration directory, where hwnet's
	// file goes; ConfDir when empty. NPWG 6.1.1 recommends a directory of
	// hwnet's own, so the runtime never sees the default network alone.
	OutputDir string
	// FileName is hwnet's file; it must sort before the default network's
	// when both share a directory, since runtimes take the first.
	FileName string
	// DefaultNetwork picks the default network by file name or network
	// name; empty takes the first configuration in ConfDir, as runtimes do.
	DefaultNetwork string
	// Template carries the shim's settings: socket, cache dir, agent wait.
	Template pluginconf.Conf
	// Interval is how often the files are re-read, and the watch tried
	// again, while ConfDir cannot be watched. A watched node re-reads them
	// on inotify events alone, which report creations, removals and edits
	// in place, and every file again when the kernel dropped events: a
	// periodic re-read there woke an idle agent for nothing.
	Interval time.Duration
	Logger   *slog.Logger
}

// Writer keeps hwnet's configuration file in step with the default
// network's.
type Writer struct {
	opts Options
}

// New returns a Writer with defaults filled in.
func New(o Options) *Writer {
	o.OutputDir = cmp.Or(o.OutputDir, o.ConfDir)
	o.FileName = cmp.Or(o.FileName, "00-hwnet.conflist")
	o.Interval = cmp.Or(o.Interval, time.Minute)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{opts: o}
}

// Path is hwnet's configuration file.
func (w *Writer) Path() string { return filepath.Join(w.opts.OutputDir, w.opts.FileName) }

// Run syncs at start and on every change in ConfDir, and in OutputDir
// to hwnet's own file, until ctx ends. A watch it cannot make (a node out
// of inotify instances), or one that ended, is tried again at every
// Interval, the files re-read meanwhile: giving up would leave the node
// without hwnet's configuration for good.
func (w *Writer) Run(ctx context.Context) error {
	if err := os.MkdirAll(w.opts.ConfDir, 0o755); err != nil {
		return fmt.Errorf("CNI config dir: %w", err)
	}
	events := make(chan watch.SocketEvent, 1)
	// A ticker whose channel no one waits on wakes nothing (Go 1.23's
	// timers): while watched, the loop does not.
	tick := time.NewTicker(w.opts.Interval)
	defer tick.Stop()
	last := ""
	var watched <-chan struct{}
	for {
		if watched == nil {
			watched = w.watch(ctx, events)
		}
		last = w.syncLogged(last)
		var retry <-chan time.Time
		if watched == nil {
			retry = tick.C
		}
		select {
		case <-ctx.Done():
			return nil
		case <-events:
		case <-watched:
			watched = nil
		case <-retry:
		}
	}
}

// watchedDirs are ConfDir's configuration files and, in an OutputDir of
// its own, hwnet's file: removed there, it is written again.
func (w *Writer) watchedDirs() []watch.Entries {
	dirs := []watch.Entries{{Dir: w.opts.ConfDir, Match: isConfFile}}
	if filepath.Clean(w.opts.OutputDir) != filepath.Clean(w.opts.ConfDir) {
		dirs = append(dirs, watch.Entries{Dir: w.opts.OutputDir, Match: func(name string) bool { return name == w.opts.FileName }})
	}
	return dirs
}

// watch starts the watches of watchedDirs, sending to events, and returns
// a channel closed once they end; nil when it could not make them.
func (w *Writer) watch(ctx context.Context, events chan<- watch.SocketEvent) <-chan struct{} {
	ended, err := watch.WatchAll(ctx, w.watchedDirs(), events, func(dir string, err error) {
		w.opts.Logger.Warn("CNI config dir watch ended; watching again", "dir", dir, "err", err)
	})
	if err != nil {
		w.opts.Logger.Warn("CNI config dir not watched; re-read every interval until it can be", "interval", w.opts.Interval, "err", err)
		return nil
	}
	return ended
}

// syncLogged syncs and logs the outcome when it differs from the last one.
func (w *Writer) syncLogged(last string) string {
	def, err := w.Sync()
	state := def
	if err != nil {
		state = err.Error()
	}
	if state == last {
		return state
	}
	if err != nil {
		w.opts.Logger.Warn("hwnet's CNI config withheld", "err", err)
	} else {
		w.opts.Logger.Info("hwnet's CNI config follows the cluster-wide default network", "default", def, "path", w.Path())
	}
	return state
}

// Sync writes hwnet's file for the default network found, or removes it
// when there is none, and returns the default network's file.
func (w *Writer) Sync() (string, error) {
	path, dl, err := w.findDefault()
	if err != nil {
		return "", errors.Join(err, w.remove())
	}
	data, err := w.render(path, dl)
	if err != nil {
		return "", err
	}
	return path, w.write(data)
}

// Default returns the cluster-wide default network's file and
// configuration: the runtime's own default, which hwnet delegates to.
func (w *Writer) Default() (string, *netconf.Delegate, error) { return w.findDefault() }

// findDefault returns the default network's file and configuration.
func (w *Writer) findDefault() (string, *netconf.Delegate, error) {
	own := func(path string) bool { return filepath.Clean(path) == filepath.Clean(w.Path()) }
	files, err := netconf.ConfigFiles(w.opts.ConfDir, own, ConfExtensions()...)
	if err != nil {
		return "", nil, err
	}
	var problems []error
	for _, f := range files {
		dl, err := netconf.LoadFile(f)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if w.opts.DefaultNetwork == "" || w.opts.DefaultNetwork == filepath.Base(f) || w.opts.DefaultNetwork == dl.Name {
			return f, dl, nil
		}
	}
	want := "CNI configuration"
	if w.opts.DefaultNetwork != "" {
		want = fmt.Sprintf("the default network %q", w.opts.DefaultNetwork)
	}
	return "", nil, errors.Join(append([]error{fmt.Errorf("%w: no %s in %s", ErrNoDefaultNetwork, want, w.opts.ConfDir)}, problems...)...)
}

// ErrNoDefaultNetwork means the cluster-wide default network is not
// configured yet, so hwnet's configuration is withheld.
var ErrNoDefaultNetwork = errors.New("cluster-wide default network not ready")

// ConfExtensions are the configuration files runtimes read, all sorted
// together by name, the first one winning.
func ConfExtensions() []string { return []string{".conflist", ".conf", ".json"} }

func isConfFile(name string) bool {
	return slices.Contains(ConfExtensions(), filepath.Ext(name))
}

// ownList is hwnet's file: a one-plugin list in the default network's
// version, declaring the default network's capabilities so the runtime
// passes their runtimeConfig on (NPWG 7.5).
type ownList struct {
	CNIVersion string            `json:"cniVersion"`
	Name       string            `json:"name"`
	Plugins    []pluginconf.Conf `json:"plugins"`
}

func (w *Writer) render(defPath string, def *netconf.Delegate) ([]byte, error) {
	plugin := w.opts.Template
	plugin.Type = pluginconf.Type
	plugin.CNIVersion, plugin.Name = "", ""
	plugin.DefaultNetwork = defPath
	plugin.Capabilities = def.Capabilities()
	version := def.CNIVersion
	if ok, _ := cniversion.GreaterThanOrEqualTo(version, "0.3.0"); !ok {
		version = "0.3.1" // configuration lists start at 0.3.0
	}
	data, err := json.MarshalIndent(ownList{CNIVersion: version, Name: "hwnet", Plugins: []pluginconf.Conf{plugin}}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("hwnet CNI config: %w", err)
	}
	return append(data, '\n'), nil
}

// write replaces hwnet's file atomically when its content changes, so the
// runtime never reads half a file.
func (w *Writer) write(data []byte) error {
	if err := os.MkdirAll(w.opts.OutputDir, 0o755); err != nil {
		return fmt.Errorf("hwnet CNI config: %w", err)
	}
	changed, err := atomicfile.Replace(w.Path(), data, 0o644)
	if err != nil {
		return fmt.Errorf("hwnet CNI config: %w", err)
	}
	if changed {
		w.opts.Logger.Info("wrote hwnet's CNI config", "path", w.Path())
	}
	return nil
}

func (w *Writer) remove() error {
	err := os.Remove(w.Path())
	if err == nil {
		w.opts.Logger.Warn("removed hwnet's CNI config: the cluster-wide default network is not configured", "path", w.Path())
		return nil
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return fmt.Errorf("hwnet CNI config: %w", err)
}
