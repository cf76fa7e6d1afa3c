package agent

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/readiness"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// CNIOptions configure the agent's CNI delegating plugin side.
type CNIOptions struct {
	// ConfDir holds the cluster-wide default network's configuration and
	// the on-disk configurations NetworkAttachmentDefinitions may name.
	ConfDir string
	// OutputDir receives hwnet's own configuration; ConfDir when empty.
	OutputDir string
	// ConfFileName is hwnet's configuration file's name.
	ConfFileName string
	// DefaultNetwork picks the default network by file or network name;
	// empty takes the first configuration in ConfDir.
	DefaultNetwork string
	// SocketPath is where the hwnet shim reaches the agent.
	SocketPath string
	// CacheDir holds the attachment records, shared with the shim.
	CacheDir string
	// DevinfoDir receives the device-info files written for delegates.
	DevinfoDir string
	// AllowedNamespaces may hold NetworkAttachmentDefinitions any pod
	// selects besides its own namespace; "*" allows all.
	AllowedNamespaces []string
	// AgentWait is how long the shim's ADD waits for an agent that is down.
	AgentWait time.Duration
	// PluginTimeout bounds each delegate plugin's execution; 0 leaves it
	// to the runtime's deadline.
	PluginTimeout time.Duration
	// NodeName is this node's name, for the pod informer's scope.
	NodeName string
	// PodsAPISocket is kubelet's Pods API, preferred over the API server.
	PodsAPISocket string
	// Kubeconfig is the API server's client configuration; empty means
	// in-cluster. REST, when set, is used instead.
	Kubeconfig string
	REST       *rest.Config
	// ShimSource, when set, is the hwnet shim binary, copied into BinDir
	// before hwnet's configuration is written, so the runtime never finds
	// the configuration without its plugin.
	ShimSource string
	BinDir     string
	// NetworkAPISocket serves the CRI network API (package crinet); ""
	// serves none. NetworkDir keeps the networks set through it.
	NetworkAPISocket string
	NetworkDir       string
	// CRISocket is the container runtime's CRI socket, asked which pod
	// sandboxes exist; empty disables the agent's own garbage collection.
	CRISocket string
	// ReconcileInterval is how often attachments of sandboxes the runtime
	// no longer has are torn down.
	ReconcileInterval time.Duration
	// Wrap, when set, wraps the request handler: tests use it to run
	// requests inside a virtual node's namespaces.
	Wrap func(server.Handler) server.Handler
}

// Production defaults of the CNI side.
const (
	DefaultCNIConfDir       = "/etc/cni/net.d"
	DefaultCNIConfFileName  = "00-hwnet.conflist"
	DefaultPodsAPISocket    = cache.DefaultPodsSocket
	DefaultCNIBinDir        = "/opt/cni/bin"
	DefaultNetworkAPISocket = "/run/hwnet/cri-network.sock"
	DefaultNetworkDir       = "/var/lib/hwnet/networks"
	cniShutdownFlushTimeout = 10 * time.Second
	// DefaultPluginTimeout is well inside kubelet's 4-minute sandbox
	// deadline, so a hung plugin fails with its name while retries remain.
	DefaultPluginTimeout = time.Minute
)

func (o CNIOptions) withDefaults() CNIOptions {
	o.ConfDir = cmp.Or(o.ConfDir, DefaultCNIConfDir)
	o.ConfFileName = cmp.Or(o.ConfFileName, DefaultCNIConfFileName)
	o.SocketPath = cmp.Or(o.SocketPath, pluginconf.DefaultSocketPath)
	o.CacheDir = cmp.Or(o.CacheDir, pluginconf.DefaultCacheDir)
	o.DevinfoDir = cmp.Or(o.DevinfoDir, devinfo.CNIDir)
	o.AgentWait = cmp.Or(o.AgentWait, pluginconf.DefaultAgentWait)
	o.PodsAPISocket = cmp.Or(o.PodsAPISocket, DefaultPodsAPISocket)
	o.BinDir = cmp.Or(o.BinDir, DefaultCNIBinDir)
	return o
}

// runCNI serves CNI requests until ctx ends: caches first, then the
// socket, then hwnet's configuration for the runtime, so a request never
// meets an agent that cannot answer it.
func (a *Agent) runCNI(ctx context.Context, wg *sync.WaitGroup) error {
	o := a.opts.CNI.withDefaults() // resolved by New
	cfg, client, err := kubeclient.Instrumented(o.REST, a.metrics.WrapTransport)
	if err != nil {
		return fmt.Errorf("CNI: %w", err)
	}
	managed, err := a.openNetworks(o)
	if err != nil {
		return err
	}
	d, err := a.newDelegator(ctx, wg, o, cfg, client, managed)
	if err != nil {
		return err
	}
	a.events = events.Start(ctx, client, o.NodeName)
	if r := a.rejected.Load(); r != nil {
		a.events.ConfigRejected(a.opts.ConfigFile, *r)
	}
	var h server.Handler = measuredHandler{next: crinet.Attaching{Next: d}, metrics: a.metrics}
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	srv := server.New(h, a.log)
	wg.Go(func() {
		if err := srv.Serve(ctx, o.SocketPath); err != nil {
			a.log.Error("CNI socket", "err", err)
		}
	})
	if o.ShimSource != "" {
		if err := installShim(o.ShimSource, o.BinDir); err != nil {
			return err
		}
	}
	writer := readiness.New(readiness.Options{ConfDir: o.ConfDir, OutputDir: o.OutputDir, FileName: o.ConfFileName,
		DefaultNetwork: o.DefaultNetwork, Logger: a.log, Template: pluginconf.Conf{SocketPath: o.SocketPath,
			CacheDir: o.CacheDir, AgentWait: pluginconf.Duration(o.AgentWait)}})
	wg.Go(func() {
		if err := writer.Run(ctx); err != nil {
			a.log.Error("CNI config", "err", err)
		}
	})
	a.serveNetworkAPI(ctx, wg, o, managed, writer)
	wg.Go(func() { a.reconcileLoop(ctx, d, o) })
	return nil
}

// openNetworks loads the networks set through the CRI network API; nil
// without a directory for them. One that cannot be read is logged and left
// on disk; the others are served.
func (a *Agent) openNetworks(o CNIOptions) (*crinet.Store, error) {
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
		a.log.Error("CRI networks not loaded", "dir", o.NetworkDir, "err", err)
	}
	return store, nil
}

// serveNetworkAPI serves the CRI network API on its socket until ctx ends.
func (a *Agent) serveNetworkAPI(ctx context.Context, wg *sync.WaitGroup, o CNIOptions, store *crinet.Store, writer *readiness.Writer) {
	if o.NetworkAPISocket == "" {
		return
	}
	srv := crinet.NewServer(crinet.Options{Store: store, Records: attachments.NewStore(o.CacheDir),
		Fallback: writer.Default, Logger: a.log})
	wg.Go(func() {
		if err := srv.Serve(ctx, o.NetworkAPISocket); err != nil {
			a.log.Error("CRI network API socket", "err", err)
		}
	})
}

// resolved checks the node name and resolves the API server's client
// configuration, returning a copy of the options that carries it.
func (o *CNIOptions) resolved() (*CNIOptions, error) {
	cfg, err := kubeclient.ForNode("CNI", o.NodeName, o.Kubeconfig, o.REST)
	if err != nil {
		return nil, err
	}
	r := *o
	r.REST = cfg
	return &r, nil
}

// newDelegator starts the pod and NetworkAttachmentDefinition caches and
// returns the delegator reading them; both stop with ctx.
func (a *Agent) newDelegator(ctx context.Context, wg *sync.WaitGroup, o CNIOptions, cfg *rest.Config, client kubernetes.Interface, managed *crinet.Store) (*delegate.Delegator, error) {
	// The pod cache tells the delegator of pods as they come, which it
	// needs to exist first; pods seen before it does are not told.
	var seen atomic.Pointer[delegate.Delegator]
	onPod := func(p cache.Pod) {
		if d := seen.Load(); d != nil {
			d.PodSeen(p)
		}
	}
	pods, source, err := cache.StartPods(ctx, cache.PodsOptions{KubeletSocket: o.PodsAPISocket, Client: client,
		NodeName: o.NodeName, OnPod: onPod, Logger: a.log})
	if err != nil {
		return nil, fmt.Errorf("CNI: pod cache: %w", err)
	}
	a.log.Info("CNI pod cache", "source", source)
	nadClient, err := nadclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("CNI: %w", err)
	}
	nads := cache.NewNADInformer(nadClient, a.log)
	wg.Go(func() {
		if err := nads.Run(ctx); err != nil {
			a.log.Error("NetworkAttachmentDefinition cache", "err", err)
		}
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("CNI: %w", err)
	}
	podNetworks := cache.NewPodNetworkInformer(ctx, dyn, client.Discovery(), a.log)
	wg.Go(func() { podNetworks.Warm(ctx) })
	status := report.NewStatusWriter(client, "hwnet", a.log)
	devices := &kubeletDevices{socket: a.opts.PodResourcesSocket, metrics: a.metrics}
	opts := delegate.Options{
		ConfDir: o.ConfDir, OwnConfFile: o.ConfFileName, DPDevinfoDir: a.opts.DevinfoDir, CNIDevinfoDir: o.DevinfoDir,
		AllowedNamespaces: o.AllowedNamespaces, Pods: pods, NADs: crinet.NADs{Store: managed, Next: nads}, PodNetworks: podNetworks,
		Devices: devices, Status: status, Logger: a.log, PluginTimeout: o.PluginTimeout,
	}
	if a.dra != nil {
		opts.Claims = a.dra
		opts.ClaimStatus = report.NewClaimStatusWriter(client, a.dra.Name())
	}
	d := delegate.New(opts)
	seen.Store(d)
	wg.Go(func() {
		<-ctx.Done()
		flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), cniShutdownFlushTimeout)
		defer cancel()
		if err := d.Close(flush); err != nil {
			a.log.Warn("CNI shutdown", "err", err)
		}
		status.Shutdown()
		devices.close()
	})
	return d, nil
}

// kubeletDevices connects to kubelet's PodResources API on first use and
// keeps the connection, which gRPC re-establishes across kubelet restarts.
type kubeletDevices struct {
	socket  string
	metrics *metrics.Metrics
	mu      sync.Mutex
	client  *podresources.Client
}

func (k *kubeletDevices) Get(ctx context.Context, namespace, name string) (podresources.Pod, error) {
	c, err := k.connect(ctx)
	if err != nil {
		k.metrics.PodResourcesRequest(err)
		return podresources.Pod{}, err
	}
	pod, err := c.Get(ctx, namespace, name)
	k.metrics.PodResourcesRequest(err)
	return pod, err
}

func (k *kubeletDevices) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		k.client.Close()
		k.client = nil
	}
}

func (k *kubeletDevices) connect(ctx context.Context) (*podresources.Client, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		return k.client, nil
	}
	c, err := podresources.Dial(ctx, k.socket)
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources at %s: %w", k.socket, err)
	}
	k.client = c
	return c, nil
}

// installShim copies the shim binary into the runtime's plugin directory
// through a temporary file and a rename, so a runtime executing the plugin
// at that moment runs the old binary or the new one, never half of one.
func installShim(src, binDir string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("CNI shim: %w", err)
	}
	if _, err := atomicfile.Replace(filepath.Join(binDir, pluginconf.Type), data, 0o755); err != nil {
		return fmt.Errorf("CNI shim: %w", err)
	}
	return nil
}
