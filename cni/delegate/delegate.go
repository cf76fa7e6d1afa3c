package delegate

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/pluginexec"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/podresources"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// DeviceSource reports the devices kubelet allocated to one pod.
type DeviceSource interface {
	Get(ctx context.Context, namespace, name string) (podresources.Pod, error)
}

// StatusSink publishes what a pod got.
type StatusSink interface {
	SetNetworkStatus(ctx context.Context, pod cache.PodRef, annotations map[string]string) error
	Event(pod cache.PodRef, eventType, reason, message string)
}

// ClaimStatusSink writes a DRA claim's device status (KEP-4817).
type ClaimStatusSink interface {
	SetClaimDeviceStatus(ctx context.Context, claim netclaim.ClaimRef, devices []netclaim.DeviceStatus) error
}

// Ledger is the device ledger's hand-out path (ledger.Book).
type Ledger interface {
	Reserve(ctx context.Context, req ledger.Request) error
	Release(ctx context.Context, h ledger.Holder)
}

// Options configure a Delegator. Every path has a production default.
type Options struct {
	// ConfDir is searched for configurations named by a
	// NetworkAttachmentDefinition without spec.config (NPWG 3.4.1).
	ConfDir string
	// OwnConfFile is hwnet's own file in ConfDir, never a delegate.
	OwnConfFile string
	// DPDevinfoDir holds the device plugin's device-info files and
	// CNIDevinfoDir the ones written for delegates.
	DPDevinfoDir  string
	CNIDevinfoDir string
	// AllowedNamespaces may hold NetworkAttachmentDefinitions any pod
	// selects, besides the pod's own namespace (nil: "default" only).
	AllowedNamespaces netconf.AllowedNamespaces
	// PodWait bounds the wait for a pod the caches do not hold yet.
	PodWait time.Duration
	// PluginTimeout bounds each delegate plugin's execution; 0 leaves it
	// to the runtime's deadline.
	PluginTimeout time.Duration
	// StatusTimeout bounds the retries of one network-status write.
	StatusTimeout time.Duration
	// StatusReuse is how long a network's passed CNI STATUS answers the
	// runtime's next asks while its plugins and configuration stay the
	// same (chain.StatusMemo); 0 runs the plugins at every ask.
	StatusReuse time.Duration

	Pods cache.PodSource
	NADs cache.NADSource
	// PodNetworks serves the KEP-3698 references; nil refuses them.
	PodNetworks cache.PodNetworkSource
	Devices     DeviceSource
	// Ledger is where an ADD reserves the devices it attaches before it
	// records them, and where their teardown gives them back; without
	// one, an ADD of a network with a device is refused.
	Ledger Ledger
	// Claims lists the devices of a pod's prepared DRA claims; nil when
	// the agent runs no DRA driver.
	Claims netclaim.Source
	Status StatusSink
	// ClaimStatus writes the networkData of claimed devices; nil writes
	// none.
	ClaimStatus ClaimStatusSink
	// VFAdmin sets the VF settings of a network's sriov-cni keys through
	// the PF, finding the VF under SysfsRoot ("" is /sys); nil refuses
	// networks that have any.
	VFAdmin   vfadmin.Admin
	SysfsRoot string
	// VFPolicy judges the sriov-cni keys of a pod's networks by their
	// NetworkAttachmentDefinition's namespace before anything of the ADD
	// is reserved, recorded or set; nil judges none (the agent sets it
	// with VFAdmin).
	VFPolicy vfpolicy.Checker
	// Exec runs plugins; nil runs them as processes that die with the
	// agent (package pluginexec).
	Exec   invoke.Exec
	Logger *slog.Logger
}

// Delegator serves hwnet's CNI requests.
type Delegator struct {
	opts    Options
	devices *deviceCache
	configs *parsedConfigs
	status  *statusQueue
	// statusMemo and recorded answer the runtime's CNI STATUS, asked
	// every 5 s, from what changed since the last.
	statusMemo *chain.StatusMemo
	recorded   recordedNetworks
	// environ is the environment delegates inherit, read once: the
	// agent's does not change.
	environ []string
	// attaching is held shared by each ADD from the recording of its
	// attachments to the end of its plugins, and exclusively by GC while
	// the networks collect their garbage (collectNetworks).
	attaching sync.RWMutex
}

// New returns a Delegator. Call Close when done to flush status writes.
func New(o Options) *Delegator {
	o.ConfDir = cmp.Or(o.ConfDir, "/etc/cni/net.d")
	o.DPDevinfoDir = cmp.Or(o.DPDevinfoDir, devinfo.DPDir)
	o.CNIDevinfoDir = cmp.Or(o.CNIDevinfoDir, devinfo.CNIDir)
	o.PodWait = cmp.Or(o.PodWait, 30*time.Second)
	o.StatusTimeout = cmp.Or(o.StatusTimeout, 2*time.Minute)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Exec == nil {
		o.Exec = pluginexec.New(os.Stderr)
	}
	d := &Delegator{
		opts:       o,
		devices:    newDeviceCache(o.Devices, 1024),
		configs:    newParsedConfigs(1024),
		environ:    os.Environ(),
		statusMemo: chain.NewStatusMemo(o.StatusReuse, time.Now),
	}
	d.status = newStatusQueue(o.Status, d.render, o.StatusTimeout, o.Logger)
	if o.ClaimStatus != nil {
		d.status.claims = d.writeClaimStatus
	}
	return d
}

// PodSeen is told of each pod the pod cache adds or changes
// (cache.PodsOptions.OnPod). A pod selecting or referencing networks has its
// devices asked of kubelet then, well before its sandbox's ADD, which then
// need not wait for the answer. It does not block.
func (d *Delegator) PodSeen(pod cache.Pod) {
	if pod.Annotations[selection.Annotation] != "" || pod.Annotations[mnv1.NetworksAnnotation] != "" {
		d.devices.prefetchEarly(pod)
	}
}

// Close waits for pending network-status writes, bounded by ctx.
func (d *Delegator) Close(ctx context.Context) error {
	return d.status.wait(ctx)
}

// call is one CNI request with its parsed parts.
type call struct {
	req   *wire.Request
	conf  *pluginconf.Conf
	pod   podArgs
	store *attachments.Store
	chain *chain.Chain
}

// Handle serves one CNI request forwarded by the shim.
func (d *Delegator) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	c, err := d.newCall(req)
	if err != nil {
		return nil, err
	}
	switch req.Command {
	case "ADD":
		return d.add(ctx, c)
	case "DEL":
		return nil, d.del(ctx, c)
	case "CHECK":
		return nil, d.check(ctx, c)
	case "STATUS":
		return nil, d.statusCmd(ctx, c)
	case "GC":
		return nil, d.gc(ctx, c)
	}
	return nil, types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("unknown CNI_COMMAND %q", req.Command), "")
}

func (d *Delegator) newCall(req *wire.Request) (*call, error) {
	conf, err := pluginconf.Parse(req.Config)
	if err != nil {
		return nil, err
	}
	pod, err := parsePodArgs(req.Args)
	if err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, err.Error(), "")
	}
	return &call{
		req:   req,
		conf:  conf,
		pod:   pod,
		store: attachments.NewStore(conf.CacheDir),
		chain: chain.New(d.opts.Exec, filepath.SplitList(req.Path), d.environ).WithPluginTimeout(d.opts.PluginTimeout),
	}, nil
}
