package agent

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
)

// Agent is hwnet-agent's state. One goroutine, Run's, owns it; watchers
// and discovery report to it over channels.
type Agent struct {
	opts Options
	log  *slog.Logger
	db   *hwdb.DB
	cfg  *pools.Config
	// configAtStart is the configuration file as New read it, to tell a
	// change made before the file's watch began.
	configAtStart []byte

	inv   *discovery.Inventory
	links devhealth.LinkStates
	// netdevs remembers which functions had a netdev (healthView).
	netdevs devhealth.NetdevMemory
	pools   map[string]*poolRun // by full resource name
	// dra serves the pools in DRA mode, draPools, when enabled; draDirty
	// says a rematch changed them since they were last published.
	dra      *dra.Driver
	draPools map[string]*draPool
	draDirty bool
	// draView is dra for the device ledger's reader, which runs on its
	// own goroutine: the driver's checkpoint as it keeps it.
	draView atomic.Pointer[dra.Driver]
	// reported holds the pool conflicts already logged; warnings holds
	// the warnings standing, logged as they appear and clear.
	reported map[string]bool
	warnings standingWarnings
	// book is the device ledger, the one path a device takes to change
	// hands; holders is its last snapshot, judged the snapshot every
	// pool's list was last judged with (or one that judges alike).
	book    *ledger.Book
	holders *ledger.Ledger
	judged  *ledger.Ledger
	// probe tells the book, at each hand-out, whether a device's netdev
	// is still in the node's network namespace.
	probe *devhealth.Probe
	// awaitingRelease tells the ledger's watch to ask kubelet at every
	// poll (awaitsRelease); set by Run's goroutine at each refresh.
	awaitingRelease atomic.Bool
	// publishNow has Run's goroutine show every front end the ledger at
	// once, unthrottled, and close the channel it sent.
	publishNow chan chan struct{}
	// pods is the CNI side's cache of the node's pods, once that runs:
	// the ledger names pods' UIDs and tells a starting kubelet's answer
	// from a release with it.
	pods atomic.Pointer[daemon.PodLookup]
	// cniSocket is the CNI socket's readiness check once it is served.
	cniSocket atomic.Pointer[func(context.Context) error]
	// collector removes the device-info files of devices nothing holds,
	// for every resource served since start, and the stale CDI specs;
	// cdiKept is the stale specs it last kept, each for a held device.
	collector *ledger.Collector
	cdiKept   map[string]string

	metrics *metrics.Metrics
	// plugins is the pools' plugins for the readiness probe, which runs
	// on other goroutines than Run's.
	plugins atomic.Pointer[[]*deviceplugin.Plugin]
	// events posts Node Events once the API server client exists.
	events *events.Node
	// vfPolicy judges the VF settings of claims and NADs by the
	// VFSettingsPolicy, for the DRA driver and the CNI side alike;
	// started with the first of them, when VF settings are set at all.
	vfPolicy dra.VFPolicy
	// vfs brings PFs to their declared VF layouts, once started.
	vfs *vflayout.Manager
	// rejected says why the configuration file is not the one served;
	// nil while it is. unfitLayouts says why vfLayouts cannot apply to
	// their PFs; nil while each can. Read by /readyz on other goroutines.
	rejected     atomic.Pointer[string]
	unfitLayouts atomic.Pointer[string]
}

// poolRun is one pool's device plugin and what it lists.
type poolRun struct {
	res     pools.Resource
	plugin  *deviceplugin.Plugin
	devices offer.Pool
	// next is the list judge worked out, which publish gives the plugin;
	// sent the list last given.
	next, sent []offer.State
	stop       context.CancelFunc
	done       chan struct{}
}

// New opens the hardware database and reads the configuration. An
// invalid configuration at start falls back to the last good one (see
// pools.StartConfig); without one it is an error.
func New(opts Options) (*Agent, error) {
	opts, err := opts.withDefaults().resolved()
	if err != nil {
		return nil, err
	}
	db, err := hwdb.OpenFile(opts.HWDBFile)
	if err != nil {
		return nil, fmt.Errorf("hwdb models: %w", err)
	}
	// Read before StartConfig: a change between the two reads is one more
	// reload, never a missed one.
	configAtStart, _ := os.ReadFile(opts.ConfigFile)
	st, err := pools.StartConfig(opts.ConfigFile, opts.LastGoodConfig, db)
	if err != nil {
		return nil, err
	}
	a := &Agent{opts: opts, log: opts.Logger, db: db, cfg: st.Config, configAtStart: configAtStart, links: devhealth.LinkStates{}, netdevs: devhealth.NetdevMemory{}, pools: map[string]*poolRun{}, draPools: map[string]*draPool{}, reported: map[string]bool{}, metrics: opts.Metrics,
		collector: &ledger.Collector{Dir: opts.DevinfoDir, Logger: opts.Logger}}
	a.publishNow = make(chan chan struct{})
	if a.probe, err = devhealth.NewProbe(opts.Netns); err != nil {
		return nil, err
	}
	a.book = a.newBook()
	a.collector.Also, a.collector.AskAgain, a.collector.Watch = a.collectCDISpecs, a.book.Recheck, a.watchCollected
	served := opts.ConfigFile
	if st.Rejected != nil {
		a.log.Error("configuration rejected at start; serving the last good one", "file", opts.ConfigFile, "lastGood", opts.LastGoodConfig, "err", st.Rejected)
		a.setRejected(st.Rejected)
		served = opts.LastGoodConfig
	}
	a.serving("configuration served", served, st.Config)
	a.keptLastGood(st.Unkept)
	a.logWarnings(st.Config)
	return a, nil
}

// serving logs and exports which configuration is served, read from file:
// an admin compares its SHA-256 with the ConfigMap's to tell the nodes
// that took a change from those that did not yet.
func (a *Agent) serving(msg, file string, cfg *pools.Config) {
	a.metrics.SetConfigServed(cfg.SHA256)
	a.log.Info(msg, "file", file, "sha256", cfg.SHA256, "resources", len(cfg.Resources))
}

// keptLastGood reports whether the configuration served was kept for the
// next start; err nil says it was. A copy that cannot be written (its
// directory missing or read-only) takes no device away: the configuration
// is served all the same, the log and hwnet_config_last_good_unkept say
// that a restart with an invalid file would find an older copy or none.
func (a *Agent) keptLastGood(err error) {
	a.metrics.SetLastGoodUnkept(err != nil)
	if err != nil {
		a.log.Warn("configuration served but not kept for the next start", "lastGood", a.opts.LastGoodConfig, "err", err)
	}
}

func (a *Agent) logWarnings(cfg *pools.Config) {
	for _, w := range cfg.Warnings {
		a.log.Warn("configuration", "warning", w)
	}
}

// signals carries what the watchers saw to Run's goroutine.
type signals struct {
	links      chan linkEvent
	hardware   chan struct{}
	config     chan struct{}
	kubelet    chan struct{}
	discovered chan discovered
}

// linkBurst is how many link events may queue for one health refresh.
const linkBurst = 1024

type discovered struct {
	inv   *discovery.Inventory
	start time.Time
	err   error
}

// Run serves until ctx ends, then stops every plugin and removes its
// socket and the device-info files of devices no pod holds. A start that
// fails leaves nothing registered with kubelet.
func (a *Agent) Run(ctx context.Context) error {
	ev := signals{
		links: make(chan linkEvent, linkBurst), hardware: make(chan struct{}, 1), config: make(chan struct{}, 1),
		kubelet: make(chan struct{}, 1), discovered: make(chan discovered, 1),
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wctx, stopWatchers := context.WithCancel(ctx)
	defer stopWatchers()
	// The probe and metrics ports are bound before anything registers: a
	// taken port fails the start with nothing to undo.
	if err := a.serveObservability(wctx, &wg); err != nil {
		return err
	}
	// Watchers subscribe while the first discovery runs: both take tens
	// of milliseconds on a large node. Netlink and uevent sockets queue
	// what happens meanwhile; the PCI poller's baseline may miss a change
	// made in those milliseconds, which the next change or a uevent
	// brings in.
	watching := make(chan error, 1)
	go func() { watching <- a.startWatchers(wctx, &wg, ev) }()
	start := time.Now()
	inv, err := a.discover(ctx)
	if werr := <-watching; werr != nil {
		return werr
	}
	if err != nil {
		return err
	}
	discovered := time.Since(start)
	if err := a.loadLedger(ctx); err != nil {
		return err
	}
	if err := a.startFrontEnds(wctx, &wg, inv, start); err != nil {
		// Device plugin sockets, the DRA driver's registration and the
		// CNI side would outlive the failed start, naming pools and a
		// driver no one serves.
		stopWatchers()
		a.shutdown()
		return err
	}
	a.log.Info("serving", "pools", len(a.pools), "functions", inv.Len(),
		"discovery", discovered.Round(time.Millisecond), "startup", time.Since(start).Round(time.Millisecond))
	a.watchLedger(wctx, &wg)
	a.startVFLayouts(wctx, &wg)
	if a.opts.Serving != nil {
		go a.opts.Serving()
	}
	a.loop(ctx, ev)
	a.shutdown()
	return nil
}

// startFrontEnds registers the DRA driver, the pools' device plugins and
// the CNI side, which serve until ctx ends or shutdown stops them.
func (a *Agent) startFrontEnds(ctx context.Context, wg *sync.WaitGroup, inv *discovery.Inventory, start time.Time) error {
	if err := a.startDRA(ctx, wg); err != nil {
		return err
	}
	a.applyInventory(ctx, inv, start)
	if a.opts.CNI != nil {
		return a.runCNI(ctx, wg)
	}
	return nil
}

func (a *Agent) discover(ctx context.Context) (*discovery.Inventory, error) {
	defer func(start time.Time) { a.metrics.ObserveDiscovery(time.Since(start)) }(time.Now())
	return discovery.Discover(ctx, discovery.Options{
		SysfsRoot: a.opts.SysfsRoot, DevRoot: a.opts.DevRoot, Netns: a.opts.Netns,
		DB: a.db, ESwitch: a.opts.ESwitch, VDPA: a.opts.VDPA,
	})
}

// loop handles events until ctx ends. Discovery runs beside it, so link
// events keep flowing while a slow re-discovery is under way; requests
// that arrive meanwhile make one more run once it ends.
func (a *Agent) loop(ctx context.Context, ev signals) {
	var running, again bool
	ledgerRefresh := newThrottle(ledgerRefreshGap)
	defer ledgerRefresh.stop()
	rediscover := func() {
		if running {
			again = true
			return
		}
		running = true
		go func() {
			start := time.Now()
			inv, err := a.discover(ctx)
			ev.discovered <- discovered{inv, start, err}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			if running {
				<-ev.discovered
			}
			return
		case e := <-ev.links:
			a.applyLinks(e, ev.links)
		case <-ev.hardware:
			rediscover()
		case <-ev.config:
			a.reloadConfig(ctx)
		case <-ev.kubelet:
			a.kubeletStarted()
		case <-a.book.Changes().C():
			if ledgerRefresh.now() {
				a.applyLedger()
			} else {
				// The refresh scheduled sees every change until then.
				a.book.Changes().Hold()
			}
		case <-ledgerRefresh.due():
			ledgerRefresh.fired()
			a.book.Changes().Release()
			a.applyLedger()
		case done := <-a.publishNow:
			a.applyLedger()
			close(done)
		case d := <-ev.discovered:
			running = false
			if d.err != nil {
				a.log.Error("re-discovery failed; keeping the last inventory", "err", d.err)
			} else {
				a.refreshLedger(ctx)
				a.applyInventory(ctx, d.inv, d.start)
			}
			if again {
				again = false
				rediscover()
			}
		}
	}
}

// applyInventory matches a new inventory to the pools and tells every
// plugin what changed.
func (a *Agent) applyInventory(ctx context.Context, inv *discovery.Inventory, start time.Time) {
	a.inv = inv
	a.links.Since(start)
	a.netdevs.Seed(inv)
	a.warnings.report(a.log, "discovery problem", inv.Problems)
	a.rematch(ctx, false)
}

// rematch matches the current inventory against the configuration. fresh
// forgets the devices pools lost, as after a configuration change. A pool
// that changes mode stops being served the old way before it is served
// the new way: a device is never served both ways.
func (a *Agent) rematch(ctx context.Context, fresh bool) {
	a.rematchWith(ctx, a.cfg.MatchRebound(a.inv, a.dra.RestingDrivers()), fresh)
}

// rematchWith serves res, the configuration's match of the inventory.
func (a *Agent) rematchWith(ctx context.Context, res *pools.Result, fresh bool) {
	a.reportMatch(res, fresh)
	pooled := map[string]bool{}
	wanted, wantedDRA := map[string]bool{}, map[string]bool{}
	for _, p := range res.Pools {
		for _, d := range p.Devices {
			pooled[d.ID] = true
		}
		if p.Resource.Mode == pools.DRA {
			wantedDRA[p.Resource.FullName()] = true
		} else {
			wanted[p.Resource.FullName()] = true
		}
	}
	a.stopUnwanted(wanted)
	a.dropDRA(wantedDRA)
	for i := range res.Pools {
		if p := &res.Pools[i]; p.Resource.Mode == pools.DRA {
			a.matchDRA(p, fresh, pooled)
		}
	}
	v := a.healthView()
	created := a.rematchPools(res, fresh, pooled)
	// Every plugin, a new one before it serves, lists devices the ledger
	// has judged: an Allocate refused as not judged yet would fail the pod.
	a.judge(v)
	a.publishDRA(ctx)
	for _, run := range a.pools {
		a.publish(run)
	}
	a.storePlugins()
	for _, run := range created {
		a.runPool(ctx, run)
	}
	a.setAwaitingRelease(a.awaitsRelease(v))
	a.updateVFLayouts()
}

// rematchPools gives each device plugin pool of res its devices, and
// returns the pools it made, which do not serve yet.
func (a *Agent) rematchPools(res *pools.Result, fresh bool, pooled map[string]bool) []*poolRun {
	var created []*poolRun
	for i := range res.Pools {
		p := &res.Pools[i]
		if p.Resource.Mode == pools.DRA {
			continue
		}
		run, isNew := a.ensurePool(p.Resource)
		if fresh {
			run.devices = offer.Pool{}
		}
		run.devices = run.devices.Rematch(p.Devices, a.inv, pooled)
		if isNew {
			created = append(created, run)
		}
	}
	return created
}

// stopUnwanted stops the device plugins of pools the configuration no
// longer serves through one.
func (a *Agent) stopUnwanted(wanted map[string]bool) {
	for name, run := range a.pools {
		if !wanted[name] {
			a.log.Info("pool removed from the configuration", "resource", name)
			a.stopPool(run)
			delete(a.pools, name)
			a.metrics.DeletePool(name)
		}
	}
}

// reportMatch logs conflicts and warnings the first time they appear, not
// at every re-discovery.
func (a *Agent) reportMatch(res *pools.Result, fresh bool) {
	if fresh {
		a.reported = map[string]bool{}
	}
	for _, c := range res.Conflicts {
		key := "conflict " + c.Device + " " + strings.Join(c.Pools, ",")
		if !a.reported[key] {
			a.reported[key] = true
			a.log.Warn("device matched by more than one pool; the first one has it", "device", c.Device, "pools", c.Pools)
		}
	}
	a.warnings.report(a.log, "pool matching", a.matchWarnings(res))
}

// matchWarnings is res's warnings and, with the DRA driver off, one for
// each pool in DRA mode, whose devices then nothing serves.
func (a *Agent) matchWarnings(res *pools.Result) []string {
	if a.dra != nil {
		return res.Warnings
	}
	warnings := slices.Clone(res.Warnings)
	for _, p := range res.Pools {
		if p.Resource.Mode == pools.DRA {
			warnings = append(warnings, p.Resource.FullName()+": mode dra, but the DRA driver is off (--dra): its devices are not served")
		}
	}
	return warnings
}

// ensurePool returns the pool's plugin, or a new one, not yet running
// (created), when there is none or its settings changed; the old one is
// stopped first.
func (a *Agent) ensurePool(res pools.Resource) (run *poolRun, created bool) {
	name := res.FullName()
	if run, ok := a.pools[name]; ok {
		if sameResource(run.res, res) {
			return run, false
		}
		a.log.Info("pool settings changed; restarting its device plugin", "resource", name)
		a.stopPool(run)
	}
	run = a.newPool(res)
	a.pools[name] = run
	a.collector.Add(name)
	return run, true
}

// sameResource reports whether the plugin serving a can serve b as it is:
// everything it hands out is the same. Selectors are the agent's matching
// alone, and Index only the entry's place in the file.
func sameResource(a, b pools.Resource) bool {
	a.Index, b.Index = 0, 0
	a.Selectors, b.Selectors = nil, nil
	return reflect.DeepEqual(a, b)
}

// applyLinks records a netlink event, and every other one already
// queued, then refreshes the health of every pool once: creating 256 VFs
// makes 512 link events, and each refresh weighs every device. A list
// that did not change is not sent again.
func (a *Agent) applyLinks(e linkEvent, more <-chan linkEvent) {
	a.links[e.name] = e.state
	left := e.state.Gone
	for drained := false; !drained; {
		select {
		case e := <-more:
			a.links[e.name] = e.state
			left = left || e.state.Gone
		default:
			drained = true
		}
	}
	start := time.Now()
	if left {
		// A netdev left, most likely into a pod whose sandbox was just
		// recorded or allocated: the holds must be now's, not a poll's,
		// or the device would look lost for a moment.
		a.refreshLedger(context.Background())
	}
	a.refresh()
	a.metrics.ObserveRefresh(time.Since(start))
}

// refresh judges every pool's devices again and tells each front end
// what changed.
func (a *Agent) refresh() {
	v := a.healthView()
	a.judge(v)
	for _, run := range a.pools {
		a.publish(run)
	}
	a.publishDRA(context.Background())
	a.setAwaitingRelease(a.awaitsRelease(v))
}

// reloadConfig switches to a changed configuration file; a bad one is
// reported and the last good one keeps serving.
func (a *Agent) reloadConfig(ctx context.Context) {
	cfg, data, err := pools.ReadChecked(a.opts.ConfigFile, a.db)
	if err != nil {
		a.log.Error("configuration rejected; still serving the last good one", "file", a.opts.ConfigFile, "err", err)
		a.setRejected(err)
		return
	}
	a.setRejected(nil)
	a.keptLastGood(pools.KeepLastGood(a.opts.LastGoodConfig, data))
	a.serving("configuration reloaded", a.opts.ConfigFile, cfg)
	a.logWarnings(cfg)
	a.cfg = cfg
	res := cfg.MatchRebound(a.inv, a.dra.RestingDrivers())
	// A pool may change front end: its devices are withdrawn from every
	// front end while it does, and what each holds must be now's, not a
	// poll's, before the other front end offers them.
	lift := a.fenceMoving(ctx, res)
	a.refreshLedger(ctx)
	a.rematchWith(ctx, res, true)
	lift()
}

// shutdown stops every plugin, which removes its socket, then removes the
// device-info files of devices nothing holds. Files of held devices stay:
// their pods' network attachments still need them.
func (a *Agent) shutdown() {
	for name, run := range a.pools {
		a.stopPool(run)
		delete(a.pools, name)
	}
	a.storePlugins()
	if a.dra != nil {
		a.dra.Stop()
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	defer a.probe.Close()
	defer a.book.Close()
	if err := a.collector.Collect(a.book.Refresh(ctx), 0); err != nil {
		a.log.Warn("device-info files left in place at shutdown", "dir", a.opts.DevinfoDir, "err", err)
	}
}

// shutdownTimeout bounds the last talk with kubelet at shutdown.
const shutdownTimeout = 3 * time.Second

// setRejected records why the configuration file is not the one served,
// for /readyz and the node's Events; nil clears it.
func (a *Agent) setRejected(err error) {
	if err == nil {
		a.rejected.Store(nil)
		return
	}
	msg := err.Error()
	a.rejected.Store(&msg)
	a.events.ConfigRejected(a.opts.ConfigFile, msg)
}
