package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/internal/probe"
)

// serveObservability starts the probe and metrics servers the options ask
// for; they stop with ctx.
func (a *Agent) serveObservability(ctx context.Context, wg *sync.WaitGroup) error {
	if a.opts.ProbeAddr != "" {
		if err := probe.Serve(ctx, wg, a.log, "probes", a.opts.ProbeAddr, probe.Handler(a.log, a.notReady, a.readyNotes)); err != nil {
			return err
		}
	}
	if a.opts.MetricsAddr != "" {
		return probe.Serve(ctx, wg, a.log, "metrics", a.opts.MetricsAddr, a.metrics.Handler(a.opts.Pprof))
	}
	return nil
}

// notReady is nil once every pool is registered with kubelet, kubelet
// accepted the DRA driver's registration when it runs, the device ledger
// reads every source of holders and, when the agent serves CNI, its socket
// answers; else it says what is missing. A configuration it does not
// serve, or a VF layout a PF cannot take, makes it unready too.
func (a *Agent) notReady(ctx context.Context) error {
	if r := a.rejected.Load(); r != nil {
		return fmt.Errorf("pool configuration %s rejected, serving the last good one: %s", a.opts.ConfigFile, *r)
	}
	if u := a.unfitLayouts.Load(); u != nil {
		return fmt.Errorf("VF layouts not applied: %s", *u)
	}
	plugins := a.plugins.Load()
	if plugins == nil {
		return errors.New("the first discovery has not finished")
	}
	var waiting []string
	for _, p := range *plugins {
		if !p.Registered() {
			waiting = append(waiting, p.ResourceName())
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("pools not registered with kubelet: %s", strings.Join(waiting, ", "))
	}
	if a.dra != nil && !a.dra.Registered() {
		return fmt.Errorf("DRA driver %s not registered with kubelet", a.dra.Name())
	}
	if why := a.book.Snapshot().UnknownWhy(); why != "" {
		return fmt.Errorf("device ledger: no device is handed out or offered: %s", why)
	}
	if a.opts.CNI == nil {
		return nil
	}
	if check := a.cniSocket.Load(); check != nil {
		return (*check)(ctx)
	}
	return daemon.Answers(ctx, a.opts.CNI.WithDefaults().SocketPath)
}

// readyNotes are what /readyz says beside ok: the device plugin pools
// with no device, which hwnetctl doctor explains on the node.
func (a *Agent) readyNotes() []string {
	plugins := a.plugins.Load()
	if plugins == nil {
		return nil
	}
	var out []string
	for _, p := range *plugins {
		if p.Listed() == 0 {
			out = append(out, "pool "+p.ResourceName()+" has no device: hwnetctl doctor --config FILE on this node says what keeps it empty")
		}
	}
	slices.Sort(out)
	return out
}

// storePlugins publishes the serving plugins to the readiness probe.
func (a *Agent) storePlugins() {
	list := make([]*deviceplugin.Plugin, 0, len(a.pools))
	for _, run := range a.pools {
		list = append(list, run.plugin)
	}
	a.plugins.Store(&list)
	// A pool that stopped serving may leave a CDI spec to collect.
	a.collector.Wake()
}
