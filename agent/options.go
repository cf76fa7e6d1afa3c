// Package agent is hwnet-agent: it discovers the node's NICs, groups them
// into resource pools by the admin's configuration, serves one kubelet
// device plugin per pool and keeps all of it current as hardware, links,
// configuration and kubelet change, without a restart.
package agent

import (
	"cmp"
	"log/slog"
	"time"

	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/podresources"
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
	// PollInterval is how often the PCI layout is fingerprinted where no
	// kernel uevents can be had; RescanInterval is how often it is where
	// they can, a safety net for what a lost uevent would miss.
	PollInterval   time.Duration
	RescanInterval time.Duration
	// GCInterval is how often device-info files are checked against
	// PodResources; DevinfoGrace protects files written since, before
	// kubelet records the allocation.
	GCInterval   time.Duration
	DevinfoGrace time.Duration
	Logger       *slog.Logger
	// ESwitch and VDPA replace the kernel's devlink and vDPA netlink, which
	// some kernels lack; nil means the kernel's.
	ESwitch discovery.ESwitchReader
	VDPA    discovery.VDPALister
	// CNI configures the CNI delegating plugin side; nil serves device
	// plugins only.
	CNI *CNIOptions
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
	// ReleaseStartupPages gives the executable's start-up pages back to the
	// kernel once serving (releaseStartupPages); off in tests, where the
	// executable is the test binary.
	ReleaseStartupPages bool
	// Uninstall removes hwnet from the node instead of running (Main).
	Uninstall bool
}

// Production defaults.
const (
	DefaultConfigFile         = "/etc/pcidp/config.json"
	DefaultLastGoodConfig     = "/var/lib/hwnet/pools-last-good"
	DefaultPluginDir          = "/var/lib/kubelet/device-plugins"
	DefaultPodResourcesSocket = podresources.DefaultSocket
	DefaultDevinfoDir         = "/var/run/k8s.cni.cncf.io/devinfo/dp"
	DefaultPollInterval       = 250 * time.Millisecond
	DefaultRescanInterval     = 30 * time.Second
	DefaultGCInterval         = 30 * time.Second
	DefaultDevinfoGrace       = time.Minute
)

func (o Options) withDefaults() Options {
	o.SysfsRoot = cmp.Or(o.SysfsRoot, "/sys")
	o.DevRoot = cmp.Or(o.DevRoot, "/dev")
	o.ConfigFile = cmp.Or(o.ConfigFile, DefaultConfigFile)
	o.PluginDir = cmp.Or(o.PluginDir, DefaultPluginDir)
	o.PodResourcesSocket = cmp.Or(o.PodResourcesSocket, DefaultPodResourcesSocket)
	o.DevinfoDir = cmp.Or(o.DevinfoDir, DefaultDevinfoDir)
	o.PollInterval = positiveOr(o.PollInterval, DefaultPollInterval)
	o.RescanInterval = positiveOr(o.RescanInterval, DefaultRescanInterval)
	o.GCInterval = positiveOr(o.GCInterval, DefaultGCInterval)
	o.DevinfoGrace = positiveOr(o.DevinfoGrace, DefaultDevinfoGrace)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	if o.ESwitch == nil {
		o.ESwitch = &kernelESwitch{devlink: discovery.DevlinkESwitch{}}
	}
	if o.VDPA == nil {
		o.VDPA = &kernelVDPA{vdpa: discovery.KernelVDPA{}}
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
