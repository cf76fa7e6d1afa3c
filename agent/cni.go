package agent

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// runCNI starts the CNI side (package daemon) and, with its API server
// client, the node's Events, which the device plugins' side and the CNI
// side's runtime GC post.
func (a *Agent) runCNI(ctx context.Context, wg *sync.WaitGroup) error {
	o := a.opts.CNI // resolved by New
	cfg, client, err := kubeclient.Instrumented(o.REST, a.metrics.WrapTransport)
	if err != nil {
		return fmt.Errorf("CNI: %w", err)
	}
	if err := a.watchVFPolicy(ctx, wg, cfg, client); err != nil {
		return fmt.Errorf("CNI: %w", err)
	}
	a.events = events.Start(ctx, client, o.NodeName)
	if r := a.rejected.Load(); r != nil {
		a.events.ConfigRejected(a.opts.ConfigFile, *r)
	}
	deps := daemon.Deps{Logger: a.log, Metrics: a.metrics, REST: cfg, Client: client, Events: a.events, Served: a.nudgeLedger,
		DevicePluginDevinfoDir: a.opts.DevinfoDir, PodResourcesSocket: a.opts.PodResourcesSocket,
		VFAdmin: a.opts.VFAdmin, VFPolicy: a.vfPolicy, SysfsRoot: a.opts.SysfsRoot, Ledger: a.book,
		PodCache: func(p daemon.PodLookup) { a.pods.Store(&p) }, PodEnded: a.book.PodEnded,
		SocketCheck: func(c func(context.Context) error) { a.cniSocket.Store(&c) }}
	if a.dra != nil {
		deps.Claims, deps.ClaimDriver = a.dra, a.dra.Name()
	}
	return daemon.Start(ctx, wg, *o, deps)
}

// watchVFPolicy starts the VFSettingsPolicy's watcher with the first front
// end that sets VF settings; an agent that sets none (no --vf-admin)
// refuses them all anyway and reads no policy.
func (a *Agent) watchVFPolicy(ctx context.Context, wg *sync.WaitGroup, cfg *rest.Config, client kubernetes.Interface) error {
	if a.opts.VFAdmin == nil || a.vfPolicy != nil {
		return nil
	}
	p, err := daemon.WatchVFPolicy(ctx, wg, cfg, client, a.log)
	if err != nil {
		return err
	}
	a.vfPolicy = p
	return nil
}
