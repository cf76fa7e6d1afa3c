// Package daemon is the agent's CNI side: the pod, NetworkAttachmentDefinition
// and PodNetwork caches, the delegator reading them, the socket the hwnet
// shim forwards the runtime's requests to, the shim's installation,
// hwnet's CNI configuration for the runtime, the CRI network API server
// and the garbage collection of attachments the runtime forgot. hwnet-agent
// starts it beside its device plugins; what it shares with them (metrics,
// the DRA driver's claims, the device plugins' device-info directory,
// kubelet's PodResources socket) comes in through Deps.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/readiness"
	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// Deps are what the CNI side takes from the rest of the agent.
type Deps struct {
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// REST and Client reach the API server, instrumented by the agent,
	// which shares the client with its node Events.
	REST   *rest.Config
	Client kubernetes.Interface
	// Events posts the node's Events (the runtime GC's); nil posts none.
	Events *events.Node
	// Served, when set, is called after each CNI ADD, DEL and GC: an
	// attachment record may have changed.
	Served func()
	// Claims lists the devices of pods' prepared DRA claims and
	// ClaimDriver is that DRA driver's name; nil without a DRA driver.
	Claims      netclaim.Source
	ClaimDriver string
	// VFAdmin sets the VF settings of NetworkAttachmentDefinitions'
	// sriov-cni keys, finding VFs under SysfsRoot; nil refuses them.
	VFAdmin   vfadmin.Admin
	SysfsRoot string
	// VFPolicy judges the sriov-cni keys of NetworkAttachmentDefinitions
	// by their namespace (WatchVFPolicy); nil judges none.
	VFPolicy vfpolicy.Checker
	// DevicePluginDevinfoDir is where the device plugins write the
	// device-info files of the devices they allocate.
	DevicePluginDevinfoDir string
	// PodResourcesSocket is kubelet's PodResources API, which says the
	// devices a pod holds.
	PodResourcesSocket string
	// Ledger is the device ledger an ADD reserves its devices in;
	// without one an ADD of a network with a device is refused.
	Ledger delegate.Ledger
	// PodCache, when set, is given the node's pod cache once it runs;
	// PodEnded, when set, is told of each pod of it that ends or goes.
	PodCache func(PodLookup)
	PodEnded func()
	// SocketCheck, when set, is given the readiness check of the CNI
	// socket once it is served: nil while a request was answered there
	// lately, else whether it answers one now.
	SocketCheck func(func(context.Context) error)
}

// PodLookup is what the rest of the agent reads of the node's pod cache.
type PodLookup interface {
	UIDOf(namespace, name string) string
	Running(namespace, name, uid string) bool
}

// Start serves CNI requests until ctx ends: caches first, then the
// socket, then hwnet's configuration for the runtime, so a request never
// meets an agent that cannot answer it. o must have been Resolved. Every
// goroutine it starts is in wg.
func Start(ctx context.Context, wg *sync.WaitGroup, o Options, deps Deps) error {
	o = o.WithDefaults()
	log := deps.Logger
	cniAccess, networkAccess, err := o.socketAccess(deps.Metrics)
	if err != nil {
		return err
	}
	// The records' directory says the CNI side runs here, for the device
	// ledger's readers (hwnetctl devices), before any pod has an ADD.
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return fmt.Errorf("CNI: attachment records: %w", err)
	}
	managed, err := openNetworks(o, log)
	if err != nil {
		return err
	}
	d, err := newDelegator(ctx, wg, o, deps, managed)
	if err != nil {
		return err
	}
	var h server.Handler = measuredHandler{next: crinet.Attaching{Next: d}, metrics: deps.Metrics, done: deps.Served}
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv := server.New(h, log, cniAccess)
	// As long as the shim's ADDs wait for an agent, its STATUS may say the
	// plugin is ready while one restarts.
	srv.LeaveRestartNotice(o.AgentWait)
	wg.Go(func() {
		if err := srv.Serve(ctx, o.SocketPath); err != nil {
			log.Error("CNI socket", "err", err)
		}
	})
	if deps.SocketCheck != nil {
		deps.SocketCheck(socketCheck(srv, o.SocketPath))
	}
	if o.ShimSource != "" {
		if err := installShim(o.ShimSource, o.BinDir); err != nil {
			return err
		}
	}
	writer := readiness.New(readiness.Options{ConfDir: o.ConfDir, OutputDir: o.OutputDir, FileName: o.ConfFileName,
		DefaultNetwork: o.DefaultNetwork, Logger: log, Template: pluginconf.Conf{SocketPath: o.SocketPath,
			CacheDir: o.CacheDir, RuntimeCacheDir: o.RuntimeCacheDir, AgentWait: pluginconf.Duration(o.AgentWait)}})
	wg.Go(func() {
		if err := writer.Run(ctx); err != nil {
			log.Error("CNI config", "err", err)
		}
	})
	serveNetworkAPI(ctx, wg, o, log, managed, writer, networkAccess)
	r := &reconciler{d: d, o: o, log: log, client: deps.Client, events: deps.Events}
	wg.Go(func() { r.run(ctx) })
	return nil
}

// openNetworks loads the networks set through the CRI network API; nil
// without a directory for them. One that cannot be read is logged and left
// on disk; the others are served.
func openNetworks(o Options, log *slog.Logger) (*crinet.Store, error) {
	switch {
	case o.NetworkDir == "" && o.NetworkAPISocket != "":
		return nil, fmt.Errorf("CNI: --cri-network-socket %s needs --cri-network-dir", o.NetworkAPISocket)
	case o.NetworkDir == "":
		return nil, nil
	}
	v := crinet.Validator{BinDirs: []string{o.BinDir}}
	store, err := crinet.OpenStore(o.NetworkDir, v)
	if store == nil {
		return nil, fmt.Errorf("CNI: --cri-network-dir: %w", err)
	}
	if err != nil {
		log.Error("CRI networks not loaded", "dir", o.NetworkDir, "err", err)
	}
	return store, nil
}

// serveNetworkAPI serves the CRI network API on its socket until ctx ends.
func serveNetworkAPI(ctx context.Context, wg *sync.WaitGroup, o Options, log *slog.Logger, store *crinet.Store, writer *readiness.Writer,
	access nodesocket.Access) {
	if o.NetworkAPISocket == "" {
		return
	}
	srv := crinet.NewServer(crinet.Options{Store: store, Records: attachments.NewStore(o.CacheDir),
		Fallback: writer.Default, Logger: log, Access: access})
	wg.Go(func() {
		if err := srv.Serve(ctx, o.NetworkAPISocket); err != nil {
			log.Error("CRI network API socket", "err", err)
		}
	})
}
