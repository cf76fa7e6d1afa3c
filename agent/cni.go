package agent

import (
	"context"
	"fmt"
	"sync"

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
	a.events = events.Start(ctx, client, o.NodeName)
	if r := a.rejected.Load(); r != nil {
		a.events.ConfigRejected(a.opts.ConfigFile, *r)
	}
	deps := daemon.Deps{Logger: a.log, Metrics: a.metrics, REST: cfg, Client: client, Events: a.events, Served: a.nudgeLedger,
		DevicePluginDevinfoDir: a.opts.DevinfoDir, PodResourcesSocket: a.opts.PodResourcesSocket,
		VFAdmin: a.opts.VFAdmin, SysfsRoot: a.opts.SysfsRoot, Ledger: a.book,
		PodCache: func(p daemon.PodLookup) { a.pods.Store(&p) }}
	if a.dra != nil {
		deps.Claims, deps.ClaimDriver = a.dra, a.dra.Name()
	}
	return daemon.Start(ctx, wg, *o, deps)
}
