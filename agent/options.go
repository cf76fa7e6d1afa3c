// Package agent is hwnet-agent: it discovers the node's NICs, groups them
// into resource pools by the admin's configuration, serves one kubelet
// device plugin per pool and keeps all of it current as hardware, links,
// configuration and kubelet change, without a restart.
//
// It is the composition root: it owns the pools' state and its event
// loop and wires the packages that do the work (node/ for discovery,
// watching, pool matching, declared VF layouts and device-info files,
// deviceplugin and dra for serving the pools, cni/daemon for the CNI
// side, internal/ for probes, Events and metrics). cmd/hwnet-agent reads the flags into
// Options.
package agent

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/deviceplugin"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
)

// Options are the agent's paths and intervals; zero values mean the
// production defaults, so tests set only what they move into a temp dir.
type Options struct {
	// SysfsRoot and DevRoot are where the kernel's /sys and /dev are seen.
	SysfsRoot string
	DevRoot   string
	// Netns is the path of the network namespace holding the node's
	// netdevs; "" is the agent's own.
	Netns string
	// VFAdmin sets VF settings (a claim's, a NetworkAttachmentDefinition's
	// sriov-cni keys) through the PF; nil refuses networks that ask for
	// any.
	VFAdmin dra.VFAdmin
	// ConfigFile is the pool configuration: the SR-IOV network device
	// plugin's file, read as-is.
	ConfigFile string
	// LastGoodConfig keeps a copy of the last configuration accepted, the
	// one served at start when ConfigFile is invalid; "" keeps none.
	LastGoodConfig string
	// HWDBFile adds NIC models to the built-in hardware database.
	HWDBFile string
	// PluginDir is kubelet's device plugin directory, where kubelet.sock
	// and the pools' sockets live.
	PluginDir string
	// PodResourcesSocket is kubelet's PodResources API.
	PodResourcesSocket string
	// DevinfoDir receives a device-info file per allocated device.
	DevinfoDir string
	// CDIDir receives the CDI specs of prepared claims and of device
	// plugin pools with cdi on; the container runtime reads them there.
	CDIDir string
	// DRAPluginsDir is kubelet's DRA plugins directory: every hwnet DRA
	// checkpoint in it holds its claims' devices, with DRA on or off and
	// whatever the driver's name.
	DRAPluginsDir string
	// FenceDir keeps the fence of a PF whose VF layout is changing, so
	// that an agent that died half way finds it.
	FenceDir string
	// PollInterval is how often the PCI layout is fingerprinted where no
	// kernel uevents can be had; RescanInterval is how often it is where
	// they can, a safety net for what a lost uevent would miss.
	PollInterval   time.Duration
	RescanInterval time.Duration
	// GCInterval is how often device-info files are checked against the
	// device ledger; DevinfoGrace protects files written since, before
	// kubelet records the allocation.
	GCInterval   time.Duration
	DevinfoGrace time.Duration
	// LedgerInterval is how often the device ledger is read again: kubelet
	// says nothing when an allocation ends, so this bounds how long a
	// device whose holder ended stays held.
	LedgerInterval time.Duration
	// KubeletSettle is how long after kubelet's PodResources socket
	// appeared the agent, when it started too, takes kubelet to list every
	// pod it runs (ledger.Sources.KubeletSettle); 0 trusts its first
	// answer.
	KubeletSettle time.Duration
	// PendingGrace is how long a device plugin allocation kubelet has not
	// reported yet stays held (ledger.BookOptions.PendingGrace); 0 means
	// ledger.DefaultPendingGrace. Tests whose kubelet records at once
	// shorten it.
	PendingGrace time.Duration
	Logger       *slog.Logger
	// ESwitch reads PFs' eSwitch modes for discovery and sets those the
	// VF layouts declare, and adds and deletes the SFs they count: the
	// kernel's devlink (devlink.Netlink, which hwnet-agent's --devlink
	// gives by default) or its record. nil: discovery asks the kernel's
	// devlink, and a layout that declares a mode or counts SFs fails,
	// saying so.
	ESwitch vflayout.ESwitch
	// VDPA replaces the kernel's vDPA netlink, which some kernels lack;
	// nil means the kernel's.
	VDPA discovery.VDPALister
	// CNI configures the CNI delegating plugin side; nil serves device
	// plugins only.
	CNI *daemon.Options
	// DRA configures the DRA driver, which serves the pools in mode
	// "dra"; nil serves device plugins only.
	DRA *DRAOptions

	// ProbeAddr serves /healthz and /readyz; MetricsAddr serves /metrics
	// and, with Pprof, Go's profiles. "" serves none. Metrics, when set,
	// replaces the agent's own collectors (tests read them).
	ProbeAddr   string
	MetricsAddr string
	Pprof       bool
	Metrics     *metrics.Metrics
	// Serving, when set, is called off the agent's loop when the
	// agent first serves, and with --dra again once the DRA driver first
	// wrote its slices (cmd/hwnet-agent gives the executable's start-up
	// pages back then; the publishing's run after the agent serves).
	Serving func()
}

// Production defaults: where kubelet, the pool ConfigMap and Multus
// expect things.
const (
	DefaultConfigFile     = pools.DefaultConfigFile
	DefaultLastGoodConfig = "/var/lib/hwnet/pools-last-good"
	DefaultPluginDir      = "/var/lib/kubelet/device-plugins"
	DefaultDevinfoDir     = "/var/run/k8s.cni.cncf.io/devinfo/dp"
	DefaultDRAPluginsDir  = dra.DefaultPluginsDir
	DefaultFenceDir       = ledger.DefaultFenceDir
)

// Production intervals: uevents say when the PCI layout changed, so
// polling is a fallback and rescanning a safety net. The kernel reports a
// uevent it dropped (ENOBUFS), which triggers a scan at once; the rescan
// is for a change it announced nowhere. At 2048 VFs a scan costs a few
// milliseconds of CPU, the largest of an idle agent's periodic costs.
const (
	DefaultPollInterval   = 250 * time.Millisecond
	DefaultRescanInterval = 5 * time.Minute
	DefaultGCInterval     = 30 * time.Second
	DefaultDevinfoGrace   = time.Minute
	DefaultLedgerInterval = 500 * time.Millisecond
	DefaultKubeletSettle  = 30 * time.Second
)

func (o Options) withDefaults() Options {
	o.SysfsRoot = cmp.Or(o.SysfsRoot, "/sys")
	o.DevRoot = cmp.Or(o.DevRoot, "/dev")
	o.ConfigFile = cmp.Or(o.ConfigFile, DefaultConfigFile)
	o.PluginDir = cmp.Or(o.PluginDir, DefaultPluginDir)
	o.PodResourcesSocket = cmp.Or(o.PodResourcesSocket, ledger.DefaultPodResourcesSocket)
	o.DevinfoDir = cmp.Or(o.DevinfoDir, DefaultDevinfoDir)
	o.CDIDir = cmp.Or(o.CDIDir, deviceplugin.DefaultCDIDir)
	o.DRAPluginsDir = cmp.Or(o.DRAPluginsDir, DefaultDRAPluginsDir)
	o.FenceDir = cmp.Or(o.FenceDir, DefaultFenceDir)
	o.PollInterval = positiveOr(o.PollInterval, DefaultPollInterval)
	o.RescanInterval = positiveOr(o.RescanInterval, DefaultRescanInterval)
	o.GCInterval = positiveOr(o.GCInterval, DefaultGCInterval)
	o.DevinfoGrace = positiveOr(o.DevinfoGrace, DefaultDevinfoGrace)
	o.LedgerInterval = positiveOr(o.LedgerInterval, DefaultLedgerInterval)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.VDPA == nil {
		o.VDPA = discovery.NewKernelVDPA()
	}
	return o
}

// positiveOr is d, or def when d cannot drive a ticker.
func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// resolved checks the CNI and DRA sides' settings, and resolves their API
// server client configurations, before anything starts: once the pools
// register with kubelet, a failure would leave a crash loop re-registering
// them.
func (o Options) resolved() (Options, error) {
	if o.CNI != nil {
		cni, err := o.CNI.Resolved()
		if err != nil {
			return o, err
		}
		o.CNI = cni
	}
	if o.DRA != nil {
		d := *o.DRA
		var err error
		if d.REST, err = kubeclient.ForNode("DRA", d.NodeName, d.Kubeconfig, d.REST); err != nil {
			return o, err
		}
		o.DRA = &d
	}
	return o, nil
}
