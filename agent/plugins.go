package agent

import (
	"context"

	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/pools"
)

// startPool runs the resource's device plugin: it serves, registers, and
// serves and registers again whenever kubelet restarts.
func (a *Agent) startPool(ctx context.Context, res pools.Resource) *poolRun {
	p := deviceplugin.New(res, deviceplugin.Options{
		PluginDir: a.opts.PluginDir, DevinfoDir: a.opts.DevinfoDir, DevRoot: a.opts.DevRoot,
		Logger: a.log.With("resource", res.FullName()),
	})
	ctx, cancel := context.WithCancel(ctx)
	run := &poolRun{res: res, plugin: p, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(run.done)
		if err := p.Run(ctx); err != nil {
			a.log.Error("device plugin stopped", "resource", res.FullName(), "err", err)
		}
	}()
	return run
}

// stopPool stops the plugin and waits until its socket is gone.
func (a *Agent) stopPool(run *poolRun) {
	run.stop()
	<-run.done
}

// kubeletStarted makes every plugin register at once with a kubelet that
// just (re)created its socket, instead of at its next retry.
func (a *Agent) kubeletStarted() {
	for _, run := range a.pools {
		run.plugin.KubeletStarted()
	}
}
