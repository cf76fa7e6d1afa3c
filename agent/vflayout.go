package agent

import (
	"context"
	"sync"

	"github.com/hwnet-io/hwnet/node/vflayout"
)

// startVFLayouts starts the manager of the declared VF layouts, once the
// Node Events exist, and hands it the first layouts.
func (a *Agent) startVFLayouts(ctx context.Context, wg *sync.WaitGroup) {
	a.vfs = vflayout.New(vflayout.Options{
		Sysfs:   vflayout.Sysfs{Root: a.opts.SysfsRoot, Settle: vflayout.DefaultSettle},
		Book:    a.book,
		Log:     a.log,
		Events:  a.events,
		Metrics: a.metrics,
		Waiting: func() { a.setAwaitingRelease(true) },
	})
	wg.Go(func() { a.vfs.Run(ctx) })
	a.updateVFLayouts()
}

// updateVFLayouts hands the manager the layouts the configuration
// declares for the current inventory; called at each ledger change too,
// as a holder letting go may let a change start.
func (a *Agent) updateVFLayouts() {
	if a.vfs == nil {
		return
	}
	layouts, warnings := a.cfg.Layouts(a.inv)
	for _, w := range warnings {
		a.reportOnce("VF layouts", w)
	}
	a.vfs.Update(layouts)
}
