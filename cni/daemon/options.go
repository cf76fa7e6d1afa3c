package daemon

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// Options configure the agent's CNI delegating plugin side.
type Options struct {
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
	// RuntimeCacheDir is the runtime's libcni cache, read for the DEL of
	// a pod the runtime attached before hwnet; empty is libcni's default.
	RuntimeCacheDir string
	// DevinfoDir receives the device-info files written for delegates.
	DevinfoDir string
	// AllowedNamespaces may hold NetworkAttachmentDefinitions any pod
	// selects besides its own namespace; "*" allows all.
	AllowedNamespaces netconf.AllowedNamespaces
	// AgentWait is how long the shim's ADD waits for an agent that is down.
	AgentWait time.Duration
	// PluginTimeout bounds each delegate plugin's execution; 0 leaves it
	// to the runtime's deadline.
	PluginTimeout time.Duration
	// StatusReuse is how long a delegate network's passed CNI STATUS
	// answers the runtime again while its plugins and configuration stay
	// the same; 0 runs the plugins at every ask.
	StatusReuse time.Duration
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
	// SocketGroup, a group name or GID, may use the two sockets above
	// besides root; "" admits root only (package nodesocket).
	SocketGroup string
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
	DefaultConfDir          = "/etc/cni/net.d"
	DefaultConfFileName     = "00-hwnet.conflist"
	DefaultSocketPath       = pluginconf.DefaultSocketPath
	DefaultCacheDir         = pluginconf.DefaultCacheDir
	DefaultDevinfoDir       = devinfo.CNIDir
	DefaultAgentWait        = pluginconf.DefaultAgentWait
	DefaultPodsAPISocket    = cache.DefaultPodsSocket
	DefaultBinDir           = "/opt/cni/bin"
	DefaultNetworkAPISocket = "/run/hwnet/cri-network.sock"
	DefaultNetworkDir       = "/var/lib/hwnet/networks"
	shutdownFlushTimeout    = 10 * time.Second
	// DefaultPluginTimeout is well inside kubelet's 4-minute deadline for
	// a sandbox's ADD and inside its 2-minute one for teardown, so a hung
	// plugin fails with its name while retries remain.
	DefaultPluginTimeout = time.Minute
	// DefaultStatusReuse runs a network's STATUS plugins once in six of
	// the runtime's asks (kubelet's, every 5 s): a failure they would find
	// beyond their files and configuration (a daemon they ask) makes the
	// node NotReady up to 30 s later than at every ask.
	DefaultStatusReuse = 30 * time.Second
)

// WithDefaults fills what o leaves empty with the production defaults.
func (o Options) WithDefaults() Options {
	o.ConfDir = cmp.Or(o.ConfDir, DefaultConfDir)
	o.ConfFileName = cmp.Or(o.ConfFileName, DefaultConfFileName)
	o.SocketPath = cmp.Or(o.SocketPath, DefaultSocketPath)
	o.CacheDir = cmp.Or(o.CacheDir, DefaultCacheDir)
	o.DevinfoDir = cmp.Or(o.DevinfoDir, DefaultDevinfoDir)
	o.AgentWait = cmp.Or(o.AgentWait, DefaultAgentWait)
	o.PodsAPISocket = cmp.Or(o.PodsAPISocket, DefaultPodsAPISocket)
	o.BinDir = cmp.Or(o.BinDir, DefaultBinDir)
	return o
}

// Resolved checks the node name and resolves the API server's client
// configuration, returning a copy of the options that carries it. The
// agent calls it before anything starts: once the pools register with
// kubelet, a failure would leave a crash loop re-registering them.
func (o *Options) Resolved() (*Options, error) {
	if _, _, err := o.socketAccess(nil); err != nil {
		return nil, err
	}
	cfg, err := kubeclient.ForNode("CNI", o.NodeName, o.Kubeconfig, o.REST)
	if err != nil {
		return nil, err
	}
	r := *o
	r.REST = cfg
	return &r, nil
}

// socketAccess says who may use the sockets; m counts the connections
// each refuses.
func (o Options) socketAccess(m *metrics.Metrics) (cni, network nodesocket.Access, err error) {
	a, err := nodesocket.ParseGroup(o.SocketGroup)
	if err != nil {
		return a, a, fmt.Errorf("CNI: --socket-group: %w", err)
	}
	cni, network = a, a
	cni.Refused = func() { m.RefusedConnection("cni") }
	network.Refused = func() { m.RefusedConnection("cri-network") }
	return cni, network, nil
}

// ConfPath is where hwnet's own CNI configuration is written.
func (o Options) ConfPath() string {
	return filepath.Join(cmp.Or(o.OutputDir, o.ConfDir), o.ConfFileName)
}

// Records is the store of the attachment records the CNI side writes,
// which the device ledger reads.
func (o Options) Records() *attachments.Store {
	return attachments.NewStore(o.WithDefaults().CacheDir)
}

// Resets is the device ledger's source of the VF resets pending in the
// cache directory (api/vfreset): each read performs them through admin
// first, and withholds the VFs of those still owed, saying why.
func (o Options) Resets(admin vfadmin.Admin, logger *slog.Logger) func(context.Context) ([]ledger.Withheld, error) {
	owed := &vfadmin.Owed{Dir: vfreset.Dir(o.WithDefaults().CacheDir), Admin: admin, Logger: logger}
	return func(ctx context.Context) ([]ledger.Withheld, error) {
		left, err := owed.Settle(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]ledger.Withheld, 0, len(left))
		for _, l := range left {
			out = append(out, ledger.WithheldFor(l.Pending, l.Err))
		}
		return out, nil
	}
}
