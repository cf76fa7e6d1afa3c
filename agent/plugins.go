package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// newPool makes the resource's device plugin, not yet running: the agent
// gives it its devices first, so that kubelet's first list is the pool and
// not an empty one.
func (a *Agent) newPool(res pools.Resource) *poolRun {
	p := deviceplugin.New(res, deviceplugin.Options{
		PluginDir: a.opts.PluginDir, DevinfoDir: a.opts.DevinfoDir, DevRoot: a.opts.DevRoot, CDIDir: a.opts.CDIDir,
		Logger: a.log, Ledger: a.book,
	})
	return &poolRun{res: res, plugin: p, done: make(chan struct{})}
}

// runPool runs the pool's device plugin: it serves, registers, and serves
// and registers again whenever kubelet restarts.
func (a *Agent) runPool(ctx context.Context, run *poolRun) {
	ctx, run.stop = context.WithCancel(ctx)
	go func() {
		defer close(run.done)
		if err := run.plugin.Run(ctx); err != nil {
			a.log.Error("device plugin stopped", "resource", run.res.FullName(), "err", err)
		}
	}()
}

// stopPool stops the plugin and waits until its socket is gone.
func (a *Agent) stopPool(run *poolRun) {
	run.stop()
	<-run.done
}

// kubeletStarted makes every plugin register at once with a kubelet that
// just (re)created its socket, instead of at its next retry, and has the
// ledger read kubelet again at once: while it could not, nothing is
// handed out.
func (a *Agent) kubeletStarted() {
	for _, run := range a.pools {
		run.plugin.KubeletStarted()
	}
	a.book.Recheck()
}

// publish sends the pool's current list, judged by v, to its plugin.
func (a *Agent) publish(run *poolRun) {
	a.logChanges(run.res.FullName(), run.sent, run.next)
	run.plugin.SetDevices(run.next)
	run.sent = run.next
}

// logChanges logs each device of a pool whose health or foreign holder
// changed and how many came and went, and updates the pool's metrics.
func (a *Agent) logChanges(name string, sent, next []offer.State) {
	prev := make(map[string]offer.State, len(sent))
	for _, d := range sent {
		prev[d.ID] = d
	}
	added, unoffered, fenced := 0, 0, 0
	for _, d := range next {
		if !d.Offered() {
			unoffered++
		}
		if d.Fenced != "" {
			fenced++
		}
		p, ok := prev[d.ID]
		delete(prev, d.ID)
		if !ok {
			added++
			// A device listed unhealthy from the start, as after a
			// restart, is logged once; only a change posts an Event.
			p = offer.State{Device: d.Device, Healthy: true}
		}
		a.logHealth(name, p, d, ok)
		a.logHeld(name, p, d)
	}
	if added > 0 || len(prev) > 0 {
		a.log.Info("pool devices changed", "resource", name, "added", added, "removed", len(prev), "devices", len(next))
	}
	a.metrics.SetPool(name, len(next), unoffered)
	a.metrics.SetPoolFenced(name, fenced)
	a.metrics.SetPoolHolders(name, holderCounts(a.holders, next))
}

func (a *Agent) logHealth(name string, p, d offer.State, changed bool) {
	switch {
	case p.Healthy && !d.Healthy:
		a.log.Warn("device unhealthy", "resource", name, "device", d.ID, "reason", d.Reason)
		if changed {
			a.events.DeviceHealth(name, d.ID, false, d.Reason)
		}
	case !p.Healthy && d.Healthy:
		a.log.Info("device healthy again", "resource", name, "device", d.ID)
		a.events.DeviceHealth(name, d.ID, true, "")
	}
}

func (a *Agent) logHeld(name string, p, d offer.State) {
	switch {
	case d.HeldBy != "" && d.HeldBy != p.HeldBy:
		a.log.Info("device held outside the pool's front end: not offered", "resource", name, "device", d.ID, "holder", d.HeldBy)
	case d.HeldBy == "" && p.HeldBy != "":
		a.log.Info("device free again", "resource", name, "device", d.ID, "holder", p.HeldBy)
	}
}

// holderCounts are the metrics' labels for the ledger's counts of the
// listed devices.
func holderCounts(l *ledger.Ledger, states []offer.State) map[string]int {
	ids := make([]string, len(states))
	for i, s := range states {
		ids[i] = s.ID
	}
	out := map[string]int{}
	for kind, n := range l.Counts(ids) {
		out[string(kind)] = n
	}
	return out
}

// collectCDISpecs removes the CDI spec of a pool that no longer hands its
// devices out through CDI (it left the configuration, or turned cdi off,
// before or after the agent started: --cdi-dir's device plugin specs are
// the node's one agent's) once nothing l knows of holds a device it names
// and it was last written before since: a container of a pod still
// holding one needs the spec to start again. It runs on the collector's
// goroutine, never at shutdown, when no pool serves and a pod just
// allocated may not yet have its container. young says it left a spec
// for being written since.
func (a *Agent) collectCDISpecs(l *ledger.Ledger, since time.Time) (young bool) {
	serving := map[string]bool{}
	if list := a.plugins.Load(); list != nil {
		for _, p := range *list {
			serving[p.CDISpecPath()] = true
		}
	}
	gone := func(path string) bool { return !serving[path] }
	held := func(id string) bool { return len(l.Holders(id)) > 0 }
	stale, young, err := deviceplugin.StaleCDISpecs(a.opts.CDIDir, gone, held, since)
	if err != nil {
		a.log.Warn("CDI specs not collected this round", "dir", a.opts.CDIDir, "err", err)
	}
	kept := map[string]string{}
	for _, s := range stale {
		if s.HeldDevice != "" {
			kept[s.Path] = s.HeldDevice
			if a.cdiKept[s.Path] != s.HeldDevice {
				a.log.Info("CDI spec kept: no pool hands out through it, but a pod holds a device it names", "spec", s.Path, "device", s.HeldDevice)
			}
			continue
		}
		if err := os.Remove(s.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			a.log.Warn("CDI spec not removed", "spec", s.Path, "err", err)
			continue
		}
		a.log.Info("CDI spec removed: no pool hands out through it and nothing holds a device it names", "spec", s.Path)
	}
	a.cdiKept = kept
	return young
}
