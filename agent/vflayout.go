package agent

import (
	"context"
	"strings"
	"sync"

	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
)

// startVFLayouts starts the manager of the declared VF layouts, once the
// Node Events exist, and hands it the first layouts.
func (a *Agent) startVFLayouts(ctx context.Context, wg *sync.WaitGroup) {
	a.vfs = vflayout.New(vflayout.Options{
		Sysfs:     vflayout.Sysfs{Root: a.opts.SysfsRoot, Settle: vflayout.DefaultSettle, ESwitch: a.opts.ESwitch},
		Book:      a.book,
		Log:       a.log,
		Events:    a.events,
		Metrics:   a.metrics,
		Waiting:   func() { a.setAwaitingRelease(true) },
		Withdrawn: a.showLedger,
		Rebound:   a.dra.RestingBindings, // a.dra, nil with DRA off, is set by now
	})
	wg.Go(func() { a.vfs.Run(ctx) })
	a.updateVFLayouts()
}

// showLedger returns once every front end lists what the ledger says now
// (Run's goroutine publishes it), or ctx ended.
func (a *Agent) showLedger(ctx context.Context) {
	done := make(chan struct{})
	select {
	case a.publishNow <- done:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// updateVFLayouts hands the manager the layouts the configuration
// declares for the current inventory; called at each ledger change too,
// as a holder letting go may let a change start. A layout its PF cannot
// take makes the agent unready while it stands.
func (a *Agent) updateVFLayouts() {
	layouts, warnings := a.cfg.Layouts(a.inv)
	a.warnings.report(a.log, "VF layouts", warnings)
	a.setUnfitLayouts(layouts)
	if a.vfs != nil {
		a.vfs.Update(layouts)
	}
}

// setUnfitLayouts records, for /readyz, why the layouts PFs cannot take
// cannot apply; nil when each can.
func (a *Agent) setUnfitLayouts(layouts []pools.PFLayout) {
	var unfit []string
	for _, l := range layouts {
		if why := l.Unfit(); why != "" {
			unfit = append(unfit, why)
		}
	}
	if len(unfit) == 0 {
		a.unfitLayouts.Store(nil)
		return
	}
	msg := strings.Join(unfit, "; ")
	a.unfitLayouts.Store(&msg)
}
