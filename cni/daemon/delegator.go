package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"

	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/cni/report"
)

// newDelegator starts the pod and NetworkAttachmentDefinition caches and
// returns the delegator reading them; both stop with ctx.
func newDelegator(ctx context.Context, wg *sync.WaitGroup, o Options, deps Deps, managed *crinet.Store) (*delegate.Delegator, error) {
	log := deps.Logger
	// The pod cache tells the delegator of pods as they come, which it
	// needs to exist first; pods seen before it does are not told.
	var seen atomic.Pointer[delegate.Delegator]
	onPod := func(p cache.Pod) {
		if d := seen.Load(); d != nil {
			d.PodSeen(p)
		}
	}
	var onEnd func(cache.Pod)
	if deps.PodEnded != nil {
		onEnd = func(cache.Pod) { deps.PodEnded() }
	}
	pods, source, err := cache.StartPods(ctx, cache.PodsOptions{KubeletSocket: o.PodsAPISocket, Client: deps.Client,
		NodeName: o.NodeName, OnPod: onPod, OnEnd: onEnd, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("CNI: pod cache: %w", err)
	}
	log.Info("CNI pod cache", "source", source)
	if deps.PodCache != nil {
		deps.PodCache(pods)
	}
	nads, podNetworks, err := startInformers(ctx, wg, deps)
	if err != nil {
		return nil, err
	}
	status := report.NewStatusWriter(deps.Client, "hwnet", log)
	devices := &kubeletDevices{life: ctx, socket: deps.PodResourcesSocket, metrics: deps.Metrics}
	opts := delegate.Options{
		ConfDir: o.ConfDir, OwnConfFile: o.ConfFileName, DPDevinfoDir: deps.DevicePluginDevinfoDir, CNIDevinfoDir: o.DevinfoDir,
		AllowedNamespaces: o.AllowedNamespaces, Pods: pods, NADs: crinet.NADs{Store: managed, Next: nads}, PodNetworks: podNetworks,
		Devices: devices, Ledger: deps.Ledger, Status: status, Logger: log, PluginTimeout: o.PluginTimeout,
		StatusReuse: o.StatusReuse,
		VFAdmin:     deps.VFAdmin, SysfsRoot: deps.SysfsRoot, VFPolicy: deps.VFPolicy,
	}
	if deps.Claims != nil {
		opts.Claims = deps.Claims
		opts.ClaimStatus = report.NewClaimStatusWriter(deps.Client, deps.ClaimDriver)
	}
	d := delegate.New(opts)
	seen.Store(d)
	wg.Go(func() { closeAtEnd(ctx, d, status, devices, log) })
	return d, nil
}

// closeAtEnd waits for ctx to end, then lets the delegator finish its
// writes (within shutdownFlushTimeout) before the status writer and the
// PodResources connection they use go.
func closeAtEnd(ctx context.Context, d *delegate.Delegator, status *report.StatusWriter, devices *kubeletDevices, log *slog.Logger) {
	<-ctx.Done()
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownFlushTimeout)
	defer cancel()
	if err := d.Close(flush); err != nil {
		log.Warn("CNI shutdown", "err", err)
	}
	status.Shutdown()
	devices.close()
}

// startInformers starts the NetworkAttachmentDefinition informer and warms
// the PodNetwork one; both stop with ctx.
func startInformers(ctx context.Context, wg *sync.WaitGroup, deps Deps) (*cache.NADInformer, *cache.PodNetworkInformer, error) {
	nadClient, err := nadclient.NewForConfig(deps.REST)
	if err != nil {
		return nil, nil, fmt.Errorf("CNI: %w", err)
	}
	nads := cache.NewNADInformer(nadClient, deps.Logger)
	wg.Go(func() {
		if err := nads.Run(ctx); err != nil {
			deps.Logger.Error("NetworkAttachmentDefinition cache", "err", err)
		}
	})
	dyn, err := dynamic.NewForConfig(deps.REST)
	if err != nil {
		return nil, nil, fmt.Errorf("CNI: %w", err)
	}
	podNetworks := cache.NewPodNetworkInformer(ctx, dyn, deps.Client.Discovery(), deps.Logger)
	wg.Go(func() { podNetworks.Warm(ctx) })
	return nads, podNetworks, nil
}
