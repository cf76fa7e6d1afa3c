package agent

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// ledgerReadTimeout bounds a full read of the device ledger: a kubelet
// that is not up yet leaves its holds unknown until the next read.
const ledgerReadTimeout = 2 * time.Second

// ledgerSources are where the agent's device ledger is read from: kubelet,
// and the DRA checkpoint and CNI records when those sides are on.
func (a *Agent) ledgerSources() ledger.Sources {
	src := ledger.Sources{PodResourcesSocket: a.opts.PodResourcesSocket, DevinfoDir: a.opts.DevinfoDir, Metrics: a.metrics}
	if d := a.opts.DRA; d != nil {
		src.Checkpoint = dra.CheckpointPath(d.DriverName, d.PluginDir)
	}
	if a.opts.CNI != nil {
		src.Records = a.opts.CNI.Records()
	}
	return src
}

// readHolders reads every source of the ledger now, with the reader of
// Run's goroutine (the watch's is on another), and makes it the ledger the
// watch compares its next poll with.
func (a *Agent) readHolders(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ledgerReadTimeout)
	defer cancel()
	a.holders = a.fresh.Read(ctx)
	a.ledger.Settle(a.holders)
	a.reportLedger(a.holders)
}

// watchLedger polls the ledger until ctx ends and hands every change to
// Run's goroutine, the newest replacing one not yet taken.
func (a *Agent) watchLedger(ctx context.Context, wg *sync.WaitGroup, out chan *ledger.Ledger) {
	wg.Go(func() {
		o := ledger.WatchOptions{Interval: a.opts.LedgerInterval, Urgent: a.awaitingRelease.Load, Nudge: a.ledgerNudge}
		a.ledger.Watch(ctx, o, func(l *ledger.Ledger) {
			select {
			case <-out:
			default:
			}
			out <- l
		})
	})
	wg.Go(func() { a.collector.Run(ctx, a.opts.GCInterval, a.opts.DevinfoGrace, a.ledger.Latest) })
}

// awaitsRelease reports whether a pooled device's verdict waits on a hold
// ending: a holder the pool's front end did not hand it to (it is offered
// once that one lets go), or device plugin pods alone holding a device
// whose netdev is away (in a pod, or gone: lost once they let go, which
// only kubelet tells). Only then is the ledger polled every
// --ledger-interval. So is a declared VF layout waiting for its VFs.
func (a *Agent) awaitsRelease(v devhealth.View) bool {
	if a.vfs != nil && a.vfs.Waiting() {
		return true
	}
	waits := func(name string, devs []pools.Device, dra bool) bool {
		fe := frontEnd(name, dra)
		return slices.ContainsFunc(devs, func(d pools.Device) bool {
			_, foreign := a.holders.Foreign(d.ID, fe)
			return foreign || (a.holders.PodsOnly(d.ID) && v.NetdevAway(&d))
		})
	}
	for name, run := range a.pools {
		if waits(name, run.devices.matched, false) {
			return true
		}
	}
	for name, run := range a.draPools {
		if waits(name, run.devices.matched, true) {
			return true
		}
	}
	return false
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
func (a *Agent) nudgeLedger() {
	select {
	case a.ledgerNudge <- struct{}{}:
	default:
	}
}

// applyLedger judges every pool again with who holds what now: a device
// whose holder ended is free, or lost, at once.
func (a *Agent) applyLedger(l *ledger.Ledger) {
	if l.Older(a.holders) {
		return // a poll queued before a full read the agent made since
	}
	a.reportLedger(l)
	a.holders = l
	a.refresh()
	a.updateVFLayouts()
}

func (a *Agent) reportLedger(l *ledger.Ledger) {
	for _, u := range l.Unknown {
		a.reportOnce("device ledger: a source is unreadable, its last holds are kept", u)
	}
}
