package agent

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// DRAOptions configure the DRA driver, which serves the pools whose mode
// is "dra"; nil serves none (and such pools not at all).
type DRAOptions struct {
	// DriverName defaults to dra.DefaultDriverName.
	DriverName string
	// RegistrarDir is kubelet's plugin registration directory; PluginDir
	// the driver's socket and checkpoint directory. "" means the
	// defaults.
	RegistrarDir string
	PluginDir    string
	// NodeName is this node's name, the owner of its ResourceSlices.
	NodeName string
	// Kubeconfig is the API server's client configuration; empty means
	// in-cluster. REST, when set, is used instead.
	Kubeconfig string
	REST       *rest.Config
	// EvictDeadPF taints the VFs of a dead PF (devhealth.View.DeadPF)
	// NoExecute instead of NoSchedule: Kubernetes evicts the pods whose
	// claims hold them, so that they start again elsewhere.
	EvictDeadPF bool
}

// draPool is a pool served through the DRA driver.
type draPool struct {
	res     pools.Resource
	devices offer.Pool
	// next is the list judge worked out, which publishDRA publishes;
	// sent the list last published.
	next, sent []offer.State
}

// startDRA registers the DRA driver with kubelet, when it is enabled;
// the pools' devices, or none, are published by the first rematch.
func (a *Agent) startDRA(ctx context.Context, wg *sync.WaitGroup) error {
	o := a.opts.DRA
	if o == nil {
		return nil
	}
	cfg, client, err := kubeclient.Instrumented(o.REST, a.metrics.WrapTransport)
	if err != nil {
		return fmt.Errorf("DRA: %w", err)
	}
	if err := a.watchVFPolicy(ctx, wg, cfg, client); err != nil {
		return fmt.Errorf("DRA: %w", err)
	}
	driverClient, err := kubeclient.WithKubeletPacedClaims(client, cfg)
	if err != nil {
		return fmt.Errorf("DRA: %w", err)
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("DRA: metadata client: %w", err)
	}
	d, err := dra.Start(ctx, dra.Options{
		DriverName: o.DriverName, NodeName: o.NodeName, KubeClient: driverClient, Metadata: meta,
		RegistrarDir: o.RegistrarDir, PluginDir: o.PluginDir, CDIDir: a.opts.CDIDir,
		DevinfoDir: a.opts.DevinfoDir, DevRoot: a.opts.DevRoot, SysfsRoot: a.opts.SysfsRoot, Logger: a.log,
		Ledger: a.book, Changed: a.nudgeLedger, VFAdmin: a.opts.VFAdmin, VFPolicy: a.vfPolicy, Metrics: a.metrics,
		Published: a.opts.Serving,
	})
	if err != nil {
		return err
	}
	a.dra = d
	a.draView.Store(d)
	// The first publication is made even with no pool in DRA mode: it
	// replaces the slices a previous agent left, which name devices this
	// one does not prepare.
	a.draDirty = true
	return nil
}

// matchDRA takes a DRA-mode pool's newly matched devices.
func (a *Agent) matchDRA(p *pools.Pool, fresh bool, pooled map[string]bool) {
	name := p.Resource.FullName()
	if a.dra == nil { // reportMatch warns of it
		return
	}
	run, ok := a.draPools[name]
	if !ok || fresh {
		run = &draPool{sent: runSent(run)}
		a.draPools[name] = run
	}
	run.res = p.Resource
	run.devices = run.devices.Rematch(p.Devices, a.inv, pooled)
	a.collector.Add(name)
	a.draDirty = true
}

func runSent(run *draPool) []offer.State {
	if run == nil {
		return nil
	}
	return run.sent
}

// dropDRA forgets the DRA pools the configuration no longer has.
func (a *Agent) dropDRA(wanted map[string]bool) {
	for name := range a.draPools {
		if !wanted[name] {
			a.log.Info("DRA pool removed from the configuration", "resource", name)
			delete(a.draPools, name)
			a.metrics.DeletePool(name)
			a.draDirty = true
		}
	}
}

// publishDRA publishes the DRA pools' devices when a rematch changed them
// or a device's health changed since the last publication.
func (a *Agent) publishDRA(ctx context.Context) {
	if a.dra == nil {
		return
	}
	runs := slices.Collect(func(yield func(*draPool) bool) {
		for _, r := range a.draPools {
			if !yield(r) {
				return
			}
		}
	})
	slices.SortFunc(runs, func(x, y *draPool) int { return cmp.Compare(x.res.Index, y.res.Index) })
	changed := a.draDirty
	for _, run := range runs {
		a.logChanges(run.res.FullName(), run.sent, run.next)
		changed = changed || !sameHealth(run.sent, run.next)
	}
	if !changed {
		// The driver keeps the lists it last published; the same
		// verdicts judged again are dropped, so that the node's device
		// states are held once, not twice.
		for _, run := range runs {
			run.next = run.sent
		}
		return
	}
	a.draDirty = false
	ps := make([]dra.Pool, len(runs))
	for i, run := range runs {
		run.sent = run.next
		ps[i] = dra.Pool{Resource: run.res, Devices: run.next, EvictDeadPF: a.opts.DRA.EvictDeadPF}
	}
	if err := a.dra.Publish(ctx, dra.Node{Inventory: a.inv, SysfsRoot: a.opts.SysfsRoot}, ps); err != nil {
		a.log.Error("DRA devices not published", "err", err)
	}
}

// sameHealth reports whether two lists name the same devices with the
// same health.
func sameHealth(a, b []offer.State) bool {
	return slices.EqualFunc(a, b, func(x, y offer.State) bool {
		return x.ID == y.ID && x.Healthy == y.Healthy && x.Reason == y.Reason && x.HeldBy == y.HeldBy && x.DeadPF == y.DeadPF &&
			x.Fenced == y.Fenced && x.Unknown == y.Unknown
	})
}
