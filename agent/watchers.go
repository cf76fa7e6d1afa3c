package agent

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/watch"
)

// linkEvent is a netlink event as the agent keeps it.
type linkEvent struct {
	name  string
	state devhealth.LinkState
}

// startWatchers subscribes every source before the first discovery, so
// that nothing that happens during it is missed, and runs them until ctx
// ends. Link events are required. Kernel uevents say when the PCI layout
// changed, so the agent costs nothing while it does not; some namespaces
// refuse them, and there the PCI poller looks every PollInterval instead
// of every RescanInterval.
func (a *Agent) startWatchers(ctx context.Context, wg *sync.WaitGroup, ev signals) error {
	links, err := watch.WatchLinks(a.opts.Netns)
	if err != nil {
		return fmt.Errorf("watching links: %w", err)
	}
	pollEvery := a.startUEvents(ctx, wg, ev)
	poller, err := watch.NewPCIPoller(a.opts.SysfsRoot)
	if err != nil {
		links.Close()
		return fmt.Errorf("watching PCI functions: %w", err)
	}
	cfg, err := watch.WatchFile(a.opts.ConfigFile)
	if err != nil {
		links.Close()
		return fmt.Errorf("watching the configuration: %w", err)
	}
	a.reloadIfChangedSinceStart(ev.config)
	isKubelet := func(name string) bool { return name == deviceplugin.KubeletSocketName }
	kubelet, err := watch.WatchSockets(a.opts.PluginDir, isKubelet)
	if err != nil {
		links.Close()
		cfg.Close()
		return fmt.Errorf("watching kubelet's socket: %w", err)
	}
	// A VFIO group device that comes (devtmpfs makes it as the VF binds,
	// maybe after the bind's uevent) or goes changes the VF's health.
	vfio, err := watch.WatchSockets(filepath.Join(a.opts.DevRoot, "vfio"), nil)
	if err != nil {
		links.Close()
		cfg.Close()
		kubelet.Close()
		return fmt.Errorf("watching VFIO group devices: %w", err)
	}
	// kubelet's PodResources socket back: the ledger reads it at once.
	podResources, err := a.watchPodResources()
	if err != nil {
		links.Close()
		cfg.Close()
		kubelet.Close()
		vfio.Close()
		return err
	}
	rawLinks := make(chan watch.LinkEvent, 64)
	sockets := make(chan watch.SocketEvent, 4)
	groups := make(chan watch.SocketEvent, 4)
	a.run(ctx, wg, "links", func(ctx context.Context) error { return links.Run(ctx, rawLinks) })
	a.run(ctx, wg, "PCI poller", func(ctx context.Context) error { return poller.Run(ctx, pollEvery, ev.hardware) })
	a.run(ctx, wg, "configuration", func(ctx context.Context) error { return cfg.Run(ctx, ev.config) })
	a.run(ctx, wg, "kubelet socket", func(ctx context.Context) error { return kubelet.Run(ctx, sockets) })
	a.run(ctx, wg, "VFIO group devices", func(ctx context.Context) error { return vfio.Run(ctx, groups) })
	podSockets := make(chan watch.SocketEvent, 4)
	a.run(ctx, wg, "kubelet PodResources socket", func(ctx context.Context) error { return podResources.Run(ctx, podSockets) })
	wg.Go(func() { forwardKubelet(ctx, podSockets, ev.kubelet) })
	wg.Go(func() { forwardLinks(ctx, rawLinks, ev.links) })
	wg.Go(func() { forwardAsHardware(ctx, groups, ev.hardware) })
	wg.Go(func() { forwardKubelet(ctx, sockets, ev.kubelet) })
	return nil
}

// watchPodResources watches kubelet's PodResources socket being made,
// in its directory, made if missing (kubelet makes it when it starts).
func (a *Agent) watchPodResources() (*watch.SocketWatcher, error) {
	dir, name := filepath.Split(a.opts.PodResourcesSocket)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("watching kubelet's PodResources socket: %w", err)
	}
	w, err := watch.WatchSockets(dir, func(n string) bool { return n == name })
	if err != nil {
		return nil, fmt.Errorf("watching kubelet's PodResources socket: %w", err)
	}
	return w, nil
}

// reloadIfChangedSinceStart asks for a reload when the configuration file
// changed between New's read and its watch: that change made no event the
// watch could see, and the agent would serve the old one until the next.
func (a *Agent) reloadIfChangedSinceStart(reload chan<- struct{}) {
	now, _ := os.ReadFile(a.opts.ConfigFile)
	if bytes.Equal(now, a.configAtStart) {
		return
	}
	select {
	case reload <- struct{}{}:
	default: // a reload is already asked for
	}
}

// run runs a watcher; one that fails is logged, since the others and the
// device plugins are still worth serving.
func (a *Agent) run(ctx context.Context, wg *sync.WaitGroup, what string, fn func(context.Context) error) {
	wg.Go(func() {
		if err := fn(ctx); err != nil {
			a.log.Error("watcher stopped", "watcher", what, "err", err)
		}
	})
}

// startUEvents turns each kernel uevent into a hardware signal and
// returns how often the PCI layout must still be polled.
func (a *Agent) startUEvents(ctx context.Context, wg *sync.WaitGroup, ev signals) time.Duration {
	uevents, err := watch.WatchUEvents(a.opts.Netns)
	if err != nil {
		a.log.Warn("no kernel uevents; PCI changes are seen by polling only", "interval", a.opts.PollInterval, "err", err)
		return a.opts.PollInterval
	}
	raw := make(chan watch.UEvent, 64)
	a.run(ctx, wg, "uevents", func(ctx context.Context) error { return uevents.Run(ctx, raw) })
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-raw:
				signal(ev.hardware)
			}
		}
	})
	return a.opts.RescanInterval
}

// signal sends on a one-slot channel without blocking: a pending signal
// already says what this one would.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

func forwardLinks(ctx context.Context, in <-chan watch.LinkEvent, out chan<- linkEvent) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-in:
			st := devhealth.LinkState{OperState: e.OperState, Up: e.Up, Gone: e.Deleted, Seen: time.Now()}
			select {
			case out <- linkEvent{e.Name, st}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// forwardKubelet signals each (re)creation of kubelet.sock.
func forwardKubelet(ctx context.Context, in <-chan watch.SocketEvent, out chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-in:
			if !e.Removed {
				signal(out)
			}
		}
	}
}

// forwardAsHardware turns each event into a hardware signal: a rescan.
func forwardAsHardware(ctx context.Context, in <-chan watch.SocketEvent, hardware chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-in:
			signal(hardware)
		}
	}
}
