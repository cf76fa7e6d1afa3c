// Package uninstall removes what hwnet left on a node once its agent is
// gone: the node side of hwnet-uninstall.yaml beside it, which runs
// hwnet-agent --uninstall on every node. Deleting hwnet-agent alone leaves
// its CNI configuration in place on purpose, so that an upgrade or restart
// never starts pods without their networks; this is the explicit removal.
package uninstall

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
	"time"

	"github.com/hwnet-io/hwnet/api/agentrestart"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/internal/probe"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// Options are the agent's paths, as its flags set them.
type Options struct {
	// ConfigFile is the pool configuration, which says which device
	// plugin sockets and device-info files are the pools'.
	ConfigFile string
	// PluginDir and DevinfoDir hold the pools' sockets and device-info
	// files; LastGoodConfig the last good pool configuration ("" none).
	PluginDir      string
	DevinfoDir     string
	LastGoodConfig string
	// CDIDir holds the CDI specs of device plugin pools with cdi.
	CDIDir string
	// FenceDir holds the fences of VF layout changes under way ("" none):
	// with no agent left to finish them, they go, each one logged.
	FenceDir string
	// CNI is the CNI side's paths; nil when it was not served.
	CNI *daemon.Options
	// PodResourcesSocket, DRAPluginsDir (every hwnet DRA checkpoint in a
	// driver's directory under it) and DRACheckpoint (the driver's own,
	// "" when DRA was off) are, with the CNI records, where the device
	// ledger says which devices running pods still hold: their
	// device-info files stay.
	PodResourcesSocket string
	DRAPluginsDir      string
	DRACheckpoint      string
	// ProbeAddr, when set, answers /readyz once the node is clean (Run).
	ProbeAddr string
	Logger    *slog.Logger
}

// Remove removes hwnet's CNI configuration (so the runtime goes back to
// the default network at once instead of waiting for an agent that will
// not come), the shim, the CNI socket, the pools' sockets, device-info
// files and CDI specs, the CNI device-info files, the attachment records, the CRI
// network API's socket and networks, and the last good pool
// configuration. The device-info files of devices running pods still hold
// stay (their applications read them), and the CDI specs that name one
// (a container that restarts needs it); so do all of them while a source
// of holders (kubelet's PodResources, any hwnet DRA checkpoint, a CNI
// record) cannot be read. It refuses while an agent still answers on
// the CNI socket: that agent would write its configuration again. It
// returns the paths it removed.
func Remove(ctx context.Context, opts Options) ([]string, error) {
	if opts.CNI != nil {
		o := opts.CNI.WithDefaults()
		opts.CNI = &o
		if daemon.Answers(ctx, o.SocketPath) == nil {
			return nil, fmt.Errorf("hwnet-agent still answers on %s: delete its DaemonSet before uninstalling", o.SocketPath)
		}
		unlock, err := quiesceRecords(ctx, o.CacheDir)
		if err != nil {
			return nil, err
		}
		defer unlock()
	}
	paths, err := existing(ctx, opts)
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

// quiesceRecords waits for the DELs a shim runs without the agent to
// finish, and holds them off until the returned function is called: one
// that removed a record while the records were removed would write its
// VF resets into the directory again.
func quiesceRecords(ctx context.Context, cacheDir string) (func(), error) {
	unlock, err := attachments.NewStore(cacheDir).LockAll(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return func() {}, nil
	}
	return unlock, err
}

// existing lists hwnet's files that exist; what it cannot read is
// reported and the rest is still listed. opts.CNI has its defaults.
func existing(ctx context.Context, opts Options) ([]string, error) {
	held := heldDevices(ctx, opts)
	paths, err := poolPaths(opts, held)
	specs, serr := cdiSpecPaths(opts, held)
	paths = append(paths, specs...)
	err = errors.Join(err, serr)
	if opts.LastGoodConfig != "" {
		paths = append(paths, opts.LastGoodConfig)
	}
	if opts.FenceDir != "" {
		paths = append(paths, opts.FenceDir)
	}
	if opts.CNI != nil {
		cni, cerr := cniPaths(*opts.CNI)
		paths = append(paths, cni...)
		err = errors.Join(err, cerr)
	}
	var found []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			found = append(found, p)
		}
	}
	return found, err
}

// ledgerTimeout bounds the wait for kubelet's PodResources API.
const ledgerTimeout = 5 * time.Second

// heldDevices reads the device ledger: who still holds which device,
// every hwnet DRA checkpoint included, as the agent reads it.
func heldDevices(ctx context.Context, opts Options) *ledger.Ledger {
	src := ledger.Sources{PodResourcesSocket: opts.PodResourcesSocket, DevinfoDir: opts.DevinfoDir, Checkpoint: opts.DRACheckpoint,
		PluginsDir: opts.DRAPluginsDir}
	if opts.CNI != nil {
		src.Records = opts.CNI.Records()
	}
	r := ledger.NewReader(src)
	defer r.Close()
	ctx, cancel := context.WithTimeout(ctx, ledgerTimeout)
	defer cancel()
	return r.Read(ctx)
}

// poolPaths is the pools' device plugin sockets and the device-info files
// of the devices nothing holds (held says), all of them kept while held
// is incomplete. Without the configuration (its ConfigMap deleted first)
// they cannot be told from other device plugins'; they stay.
func poolPaths(opts Options, held *ledger.Ledger) ([]string, error) {
	cfg, err := pools.Load(opts.ConfigFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("pools' files left in place: %w", err)
	}
	dp, err := devinfo.List(opts.DevinfoDir)
	if !held.Complete() {
		cmp.Or(opts.Logger, slog.Default()).Warn("the pools' device-info files left in place: which devices pods hold is unknown", "unknown", held.Unknown)
	}
	var paths []string
	for _, r := range cfg.Resources {
		name := r.FullName()
		paths = append(paths, filepath.Join(opts.PluginDir, deviceplugin.SocketName(name)))
		for _, f := range dp {
			if f.Belongs(name) && held.Complete() && len(held.Holders(f.DeviceID)) == 0 {
				paths = append(paths, f.Path)
			}
		}
	}
	return paths, err
}

// cdiSpecPaths is the device plugins' CDI specs that name no device held
// (held says), none while held is incomplete.
func cdiSpecPaths(opts Options, held *ledger.Ledger) ([]string, error) {
	if opts.CDIDir == "" {
		return nil, nil
	}
	all := func(string) bool { return true }
	stale, _, err := deviceplugin.StaleCDISpecs(opts.CDIDir, all, func(id string) bool { return len(held.Holders(id)) > 0 }, time.Now().Add(time.Hour))
	if err != nil {
		return nil, fmt.Errorf("CDI specs left in place: %w", err)
	}
	log := cmp.Or(opts.Logger, slog.Default())
	var paths []string
	for _, s := range stale {
		switch {
		case !held.Complete():
			log.Warn("CDI spec left in place: which devices pods hold is unknown", "spec", s.Path, "unknown", held.Unknown)
		case s.HeldDevice != "":
			log.Warn("CDI spec left in place: a pod holds a device it names", "spec", s.Path, "device", s.HeldDevice)
		default:
			paths = append(paths, s.Path)
		}
	}
	return paths, nil
}

// cniPaths is the CNI side's configuration, shim, sockets (and the last
// agent's restart notice), networks,
// records and the device-info files the records name.
func cniPaths(o daemon.Options) ([]string, error) {
	paths := []string{o.ConfPath(), o.SocketPath, agentrestart.Path(o.SocketPath)}
	if o.BinDir != "" {
		paths = append(paths, filepath.Join(o.BinDir, pluginconf.Type))
	}
	for _, p := range []string{o.NetworkAPISocket, o.NetworkDir} {
		if p != "" {
			paths = append(paths, p)
		}
	}
	files, err := recordedDevinfo(o.CacheDir)
	return append(paths, append(files, o.CacheDir)...), err
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

// logFences warns of each VF layout change an agent left under way: its
// PF may be half way between two layouts, and no agent is left to finish
// or undo it.
func logFences(log *slog.Logger, dir string) {
	fences, err := ledger.LoadFences(dir)
	if err != nil {
		log.Warn("fences of VF layout changes under way cannot be read", "dir", dir, "err", err)
	}
	for _, f := range fences {
		log.Warn("a VF layout change was under way: check the PF's VFs by hand", "pf", f.PF, "fence", f.Key, "reason", f.Reason)
	}
}

// Run is hwnet-agent --uninstall: Remove, then, with ProbeAddr, /readyz
// answers ok until ctx ends, so the uninstall DaemonSet's rollout says
// when every node is clean.
func Run(ctx context.Context, opts Options) error {
	log := cmp.Or(opts.Logger, slog.Default())
	logFences(log, opts.FenceDir)
	removed, err := Remove(ctx, opts)
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
