package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/internal/probe"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/pools"
)

// Uninstall removes what hwnet left on the node once its agent is gone:
// hwnet's CNI configuration (so the runtime goes back to the default
// network at once instead of waiting for an agent that will not come),
// the shim, the CNI socket, the pools' sockets and device-info files, the
// CNI device-info files, the attachment records, the CRI network API's
// socket and networks, and the last good pool configuration. It refuses while an
// agent still answers on the CNI socket: that agent would write its
// configuration again. It returns the paths it removed.
func Uninstall(ctx context.Context, opts Options) ([]string, error) {
	opts = opts.withDefaults()
	if opts.CNI != nil {
		o := opts.CNI.WithDefaults()
		if daemon.Answers(ctx, o.SocketPath) == nil {
			return nil, fmt.Errorf("hwnet-agent still answers on %s: delete its DaemonSet before uninstalling", o.SocketPath)
		}
	}
	paths, err := uninstallPaths(opts)
	var removed []string
	for _, p := range paths {
		switch rerr := os.RemoveAll(p); {
		case rerr != nil:
			err = errors.Join(err, rerr)
		default:
			removed = append(removed, p)
		}
	}
	return removed, err
}

// uninstallPaths lists hwnet's files that exist; what it cannot read is
// reported and the rest is still listed.
func uninstallPaths(opts Options) ([]string, error) {
	var paths []string
	var errs []error
	// Without the configuration (its ConfigMap deleted first) the pools'
	// files cannot be told from other device plugins'; they stay.
	cfg, err := pools.Load(opts.ConfigFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		errs = append(errs, fmt.Errorf("pools' files left in place: %w", err))
	default:
		dp, err := devinfo.List(opts.DevinfoDir)
		errs = append(errs, err)
		for _, r := range cfg.Resources {
			name := r.FullName()
			paths = append(paths, filepath.Join(opts.PluginDir, deviceplugin.SocketName(name)))
			for _, f := range dp {
				if f.Belongs(name) {
					paths = append(paths, f.Path)
				}
			}
		}
	}
	if opts.LastGoodConfig != "" {
		paths = append(paths, opts.LastGoodConfig)
	}
	if opts.CNI != nil {
		o := opts.CNI.WithDefaults()
		paths = append(paths, o.ConfPath(), o.SocketPath)
		if o.BinDir != "" {
			paths = append(paths, filepath.Join(o.BinDir, pluginconf.Type))
		}
		for _, p := range []string{o.NetworkAPISocket, o.NetworkDir} {
			if p != "" {
				paths = append(paths, p)
			}
		}
		files, err := recordedDevinfo(o.CacheDir)
		errs = append(errs, err)
		paths = append(paths, append(files, o.CacheDir)...)
	}
	var existing []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			existing = append(existing, p)
		}
	}
	return existing, errors.Join(errs...)
}

// recordedDevinfo is the CNI device-info files the records name.
func recordedDevinfo(cacheDir string) ([]string, error) {
	store := attachments.NewStore(cacheDir)
	ids, err := store.List()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, id := range ids {
		rec, err := store.Load(id)
		if err != nil {
			continue // a torn record names nothing more to remove
		}
		for _, a := range rec.Attachments {
			if a.DeviceInfoFile != "" {
				files = append(files, a.DeviceInfoFile)
			}
		}
	}
	return files, nil
}

// runUninstall is --uninstall: Uninstall, then, with --probe-addr, /readyz
// answers ok until ctx ends, so a cleanup DaemonSet's rollout says when
// every node is clean.
func runUninstall(ctx context.Context, opts Options) error {
	log := cmp.Or(opts.Logger, slog.Default())
	removed, err := Uninstall(ctx, opts)
	for _, p := range removed {
		log.Info("removed", "path", p)
	}
	if err != nil {
		return fmt.Errorf("uninstall: %w", err)
	}
	log.Info("hwnet uninstalled from this node", "removed", len(removed))
	if opts.ProbeAddr == "" {
		return nil
	}
	var wg sync.WaitGroup
	if err := probe.Serve(ctx, &wg, log, "probes", opts.ProbeAddr, http.HandlerFunc(probe.OK)); err != nil {
		return err
	}
	wg.Wait()
	return nil
}
