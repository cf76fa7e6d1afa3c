package agent

import (
	"context"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/watch"
)

// ledgerReadTimeout bounds a full read of the device ledger: a kubelet
// that is not up yet leaves its holds unknown until the next read.
const ledgerReadTimeout = 2 * time.Second

// newBook is the agent's device ledger: kubelet, every hwnet DRA
// checkpoint under kubelet's plugins directory (DRA on or off, any driver
// name), the CNI records and the pending VF resets when that side is on,
// and the fences a VF layout change keeps on disk.
func (a *Agent) newBook() *ledger.Book {
	src := ledger.Sources{PodResourcesSocket: a.opts.PodResourcesSocket, DevinfoDir: a.opts.DevinfoDir, Metrics: a.metrics,
		PluginsDir: a.opts.DRAPluginsDir, PodUID: a.podUID, KubeletSettle: a.opts.KubeletSettle}
	if a.opts.CNI != nil {
		// The CNI side's pods cache, once it runs, tells the Book of
		// each pod's end (Book.PodEnded).
		src.PodRunning, src.PodEndsTold = a.podRunning, func() bool { return a.pods.Load() != nil }
	}
	if d := a.opts.DRA; d != nil {
		src.Checkpoint = dra.CheckpointPath(d.DriverName, d.PluginDir)
		src.Driver = a.draViewer
	}
	if a.opts.CNI != nil {
		src.Records = a.opts.CNI.Records()
		// Each read performs the VF resets the shim, or a failed reset,
		// left pending: the first, at Load, before any front end serves.
		src.Resets = a.opts.CNI.Resets(a.opts.VFAdmin, a.log)
	}
	return ledger.NewBook(ledger.BookOptions{Sources: src, SysfsRoot: a.opts.SysfsRoot, FenceDir: a.opts.FenceDir,
		Logger: a.log, Metrics: a.metrics, Changed: a.collector.Wake, PendingGrace: a.opts.PendingGrace,
		Present: a.probe.Present, PFUp: a.probe.PFUp})
}

// draViewer is the DRA driver for the device ledger's reader, nil until
// it runs.
func (a *Agent) draViewer() ledger.CheckpointViewer {
	if d := a.draView.Load(); d != nil {
		return d
	}
	return nil
}

// watchCollected watches the directories the collector looks in: a file
// written there by hand, or by an agent before, is looked at without a
// poll.
func (a *Agent) watchCollected(ctx context.Context, changed chan<- watch.SocketEvent) (<-chan struct{}, error) {
	// The files' hidden temporaries say nothing the collector looks at.
	dirs := []watch.Entries{{Dir: a.opts.DevinfoDir, Match: watch.Visible}, {Dir: a.opts.CDIDir, Match: watch.Visible}}
	return watch.WatchAll(ctx, dirs, changed, func(dir string, err error) {
		a.log.Warn("collected directory's watch ended; watching again", "dir", dir, "err", err)
	})
}

// podUID is the UID of the pod of the node's pod cache with that name, ""
// when the CNI side is off or the cache knows none or two.
func (a *Agent) podUID(namespace, name string) string {
	if p := a.pods.Load(); p != nil {
		return (*p).UIDOf(namespace, name)
	}
	return ""
}

// podRunning reports whether the node's pod cache holds a pod of that
// name (and UID) that has not ended; before the cache runs, every pod
// may.
func (a *Agent) podRunning(namespace, name, uid string) bool {
	if p := a.pods.Load(); p != nil {
		return (*p).Running(namespace, name, uid)
	}
	return true
}

// loadLedger reads every source of the ledger and the fences an earlier
// agent left, before any front end serves.
func (a *Agent) loadLedger(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ledgerReadTimeout)
	defer cancel()
	err := a.book.Load(ctx)
	a.holders = a.book.Snapshot()
	a.reportLedger(a.holders)
	return err
}

// refreshLedger reads every source now, on Run's goroutine, for a change
// that must see now's holds, not a poll's.
func (a *Agent) refreshLedger(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ledgerReadTimeout)
	defer cancel()
	a.holders = a.book.Refresh(ctx)
	a.reportLedger(a.holders)
}

// watchLedger polls the ledger's sources until ctx ends, and collects the
// device-info files nothing holds.
func (a *Agent) watchLedger(ctx context.Context, wg *sync.WaitGroup) {
	wg.Go(func() {
		o := ledger.WatchOptions{Interval: a.opts.LedgerInterval, Urgent: a.awaitingRelease.Load}
		a.book.Watch(ctx, o)
	})
	wg.Go(func() { a.collector.Run(ctx, a.opts.GCInterval, a.opts.DevinfoGrace, a.book.Snapshot) })
}

// setAwaitingRelease records whether a hold's end is awaited, and wakes
// the watch when one now is: it polls slowly otherwise.
func (a *Agent) setAwaitingRelease(awaits bool) {
	if !a.awaitingRelease.Swap(awaits) && awaits {
		a.nudgeLedger()
	}
}

// nudgeLedger has the ledger's watch poll at once: a source may have
// changed. It never blocks.
func (a *Agent) nudgeLedger() { a.book.Nudge() }

// applyLedger judges every pool again with who holds what now: a device
// whose holder ended is free, or lost, at once; a fence withdraws its
// devices. A change no pool's list shows (a claim prepared for a device
// of its own pool, released again) is not judged again: at 2048 VFs a
// judgement of every device took about 4 ms of CPU (an execution trace
// of the agent, 2 vCPU AMD EPYC), up to ten a second through a burst of
// prepares, taken from the calls and the API server they wait for.
func (a *Agent) applyLedger() {
	a.holders = a.book.Snapshot()
	a.reportLedger(a.holders)
	if a.judgesAlike() {
		a.judged = a.holders
		a.countHolders()
	} else {
		a.refresh()
	}
	a.updateVFLayouts()
}

// judgesAlike reports whether judging every pool with the ledger now
// would list what the last judgement did (offer.Pool.Unmoved): only the
// holders of some devices changed since, in no way a pool's list shows,
// and no rematch is left to publish.
func (a *Agent) judgesAlike() bool {
	if a.judged == nil || a.draDirty {
		return false
	}
	changed, every := a.judged.Changed(a.holders)
	if every {
		return false
	}
	v := devhealth.View{Inv: a.inv, Links: a.links, Netdevs: a.netdevs}
	for name, run := range a.pools {
		if !run.devices.Unmoved(v, a.judged, a.holders, frontEnd(name, false), changed) {
			return false
		}
	}
	for name, run := range a.draPools {
		if !run.devices.Unmoved(v, a.judged, a.holders, frontEnd(name, true), changed) {
			return false
		}
	}
	return true
}

// countHolders updates each pool's holder metrics from the ledger now,
// which a judgement does as it logs the pool's changes.
func (a *Agent) countHolders() {
	for name, run := range a.pools {
		a.metrics.SetPoolHolders(name, holderCounts(a.holders, run.sent))
	}
	for name, run := range a.draPools {
		a.metrics.SetPoolHolders(name, holderCounts(a.holders, run.sent))
	}
}

func (a *Agent) reportLedger(l *ledger.Ledger) {
	a.warnings.report(a.log, "device ledger: a source cannot be read; no device is handed out or offered until it is", l.Unknown)
}

// modeSwitchFence is the key of the fence a configuration change takes
// on the devices that change front end.
const modeSwitchFence = "pool-switch"

// fenceMoving fences the devices res serves through another front end
// than now (offer.Moving) and publishes their withdrawal; the returned
// func lifts the fence and publishes again.
func (a *Agent) fenceMoving(ctx context.Context, res *pools.Result) func() {
	served := map[ledger.FrontEnd][]pools.Device{}
	for name, run := range a.pools {
		served[frontEnd(name, false)] = run.devices.Matched
	}
	for name, run := range a.draPools {
		served[frontEnd(name, true)] = run.devices.Matched
	}
	moving := offer.Moving(served, res)
	if len(moving) == 0 {
		return func() {}
	}
	f := ledger.Fence{Key: modeSwitchFence, Devices: moving, Reason: "its pool is switching front end"}
	if err := a.book.Fence(ctx, f, false); err != nil {
		a.log.Error("devices switching front end not fenced", "devices", len(moving), "err", err)
	}
	a.applyLedger()
	return func() {
		if err := a.book.Unfence(modeSwitchFence); err != nil {
			a.log.Error("fence of the devices that switched front end not lifted", "err", err)
		}
		a.applyLedger()
	}
}

// judge works out every pool's list by v and tells the ledger why each
// unhealthy device is, before any front end is told: a hand-out between
// the two would give out a device kubelet already lists unhealthy.
func (a *Agent) judge(v devhealth.View) {
	a.judged = a.holders
	var lists [][]offer.State
	for name, run := range a.pools {
		run.next = run.devices.States(v, a.holders, frontEnd(name, false))
		lists = append(lists, run.next)
	}
	for name, run := range a.draPools {
		run.next = run.devices.States(v, a.holders, frontEnd(name, true))
		lists = append(lists, run.next)
	}
	a.probe.Expect(offer.Netdevs(lists...))
	a.book.Judge(offer.Verdicts(lists...))
}

// awaitsRelease reports whether a pooled device's verdict waits on a hold
// ending (offer.Pool.AwaitsRelease): only then is the ledger polled every
// --ledger-interval (and while the ledger is unsettled: Book.Watch). So
// is a declared VF layout waiting for its VFs.
func (a *Agent) awaitsRelease(v devhealth.View) bool {
	if a.vfs != nil && a.vfs.Waiting() {
		return true
	}
	for name, run := range a.pools {
		if run.devices.AwaitsRelease(v, a.holders, frontEnd(name, false)) {
			return true
		}
	}
	for name, run := range a.draPools {
		if run.devices.AwaitsRelease(v, a.holders, frontEnd(name, true)) {
			return true
		}
	}
	return false
}
