package agent

import (
	"context"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/ledger"
)

// ledgerStartTimeout bounds the first read of the device ledger: a kubelet
// that is not up yet leaves its holds unknown until the next read.
const ledgerStartTimeout = 2 * time.Second

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

// readLedger reads the ledger once, before the first match hands anything
// out.
func (a *Agent) readLedger(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, ledgerStartTimeout)
	defer cancel()
	a.holders = a.ledger.Read(ctx)
	a.reportLedger(a.holders)
}

// watchLedger polls the ledger until ctx ends and hands every change to
// Run's goroutine, the newest replacing one not yet taken.
func (a *Agent) watchLedger(ctx context.Context, wg *sync.WaitGroup, out chan *ledger.Ledger) {
	wg.Go(func() {
		a.ledger.Watch(ctx, a.opts.LedgerInterval, func(l *ledger.Ledger) {
			select {
			case <-out:
			default:
			}
			out <- l
		})
	})
	wg.Go(func() { a.collector.Run(ctx, a.opts.GCInterval, a.opts.DevinfoGrace, a.ledger.Latest) })
}

// applyLedger judges every pool again with who holds what now: a device
// whose holder ended is free, or lost, at once.
func (a *Agent) applyLedger(l *ledger.Ledger) {
	a.reportLedger(l)
	a.holders = l
	a.refresh()
}

func (a *Agent) reportLedger(l *ledger.Ledger) {
	for _, u := range l.Unknown {
		a.reportOnce("device ledger: a source is unreadable, its last holds are kept", u)
	}
}
