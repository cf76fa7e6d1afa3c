package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/api/cnicache"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/logging"
	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/podresources"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// command is what the command line asks for: the agent's options, and
// whether to uninstall hwnet from the node instead of running.
type command struct {
	opts      agent.Options
	uninstall bool
	// releaseStartupPages gives the executable's start-up pages back to
	// the kernel once the agent serves (startup.ReleasePages).
	releaseStartupPages bool
	// paceGC collects at GOGC's pace without Go's forced collection every
	// two minutes (gcpace.Start).
	paceGC bool
}

// parseFlags reads the command line into a command; --version is
// errVersion and --help flag.ErrHelp.
func parseFlags(args []string, errOut io.Writer) (command, error) {
	var c command
	o := &c.opts
	fs := flag.NewFlagSet("hwnet-agent", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&o.ConfigFile, "config-file", agent.DefaultConfigFile, "pool configuration (the SR-IOV network device plugin's format, JSON or YAML)")
	fs.StringVar(&o.LastGoodConfig, "last-good-config", agent.DefaultLastGoodConfig, "copy of the last pool configuration accepted, served at start when --config-file is invalid (\"\" keeps none)")
	fs.StringVar(&o.SysfsRoot, "sysfs", "/sys", "sysfs root")
	fs.StringVar(&o.DevRoot, "dev", "/dev", "device node root")
	fs.StringVar(&o.Netns, "netns", "", "path of the network namespace of the node's netdevs (default: the agent's own)")
	fs.StringVar(&o.HWDBFile, "hwdb", "", "extra NIC models, JSON or YAML")
	fs.StringVar(&o.PluginDir, "device-plugin-dir", agent.DefaultPluginDir, "kubelet's device plugin directory (kubelet.sock and the pools' sockets)")
	fs.StringVar(&o.PodResourcesSocket, "pod-resources-socket", podresources.DefaultSocket, "kubelet's PodResources API socket")
	fs.StringVar(&o.DevinfoDir, "devinfo-dir", agent.DefaultDevinfoDir, "directory of the device-info files written on Allocate")
	fs.StringVar(&o.CDIDir, "cdi-dir", handout.DefaultCDIDir, "directory of the CDI specs written for prepared claims and for device plugin pools with cdi, which the container runtime reads")
	fs.StringVar(&o.DRAPluginsDir, "dra-plugins-dir", agent.DefaultDRAPluginsDir, "kubelet's DRA plugins directory: every hwnet DRA checkpoint in a driver's directory under it holds its claims' devices, with --dra or without and whatever the driver's name")
	fs.StringVar(&o.FenceDir, "fence-dir", agent.DefaultFenceDir, "directory keeping the fence of each PF whose VF layout is changing, so that a restarted agent finishes or undoes the change before handing out its VFs")
	fs.DurationVar(&o.PollInterval, "poll-interval", agent.DefaultPollInterval, "how often the PCI layout is checked for changes where the kernel's uevents cannot be had")
	fs.DurationVar(&o.RescanInterval, "rescan-interval", agent.DefaultRescanInterval, "how often the PCI layout is checked for changes a lost uevent would miss")
	fs.DurationVar(&o.GCInterval, "devinfo-gc-interval", agent.DefaultGCInterval, "at most how often device-info files, and CDI specs of pools without cdi, that nothing holds are removed (a collection follows each change of the holds, the pools or their directories; it repeats every interval only while one left something to look at again)")
	fs.DurationVar(&o.LedgerInterval, "ledger-interval", agent.DefaultLedgerInterval, "how often the device ledger (who holds each device: PodResources, every hwnet DRA checkpoint, the CNI records) is read again")
	fs.DurationVar(&o.KubeletSettle, "kubelet-settle", agent.DefaultKubeletSettle, "how long after kubelet started (its PodResources socket's time) an agent that started too waits before it takes kubelet's answer as listing every pod it runs: a starting kubelet answers before its pods are loaded; until then no device is handed out (0 trusts its first answer)")
	fs.BoolVar(&c.releaseStartupPages, "release-startup-pages", true, "once serving, give the pages of the executable that only start-up used back to the kernel (a smaller RSS)")
	fs.BoolVar(&c.paceGC, "pace-gc", true, "collect garbage when the heap has grown by GOGC percent, through a memory limit moved after every collection and capped at GOMEMLIMIT, instead of also every two minutes (an idle agent then wakes less); no effect with GOGC=off")
	vfAdmin := fs.String("vf-admin", "netlink", "how VF settings (vlan, spoofchk, trust, rates, link state, MTU, MAC) are set through the PF: netlink, or record:PATH to only append each call to PATH as JSON lines (nodes whose PFs cannot take VF settings, such as the e2e's virtual node)")
	eswitch := fs.String("devlink", "netlink", "how PFs' eSwitch modes (a vfLayouts entry's eswitchMode) are read and set, and their mlx5 SFs (numSfs) added and deleted: netlink (the kernel's devlink), or record:PATH to only append each set and SF port to PATH as JSON lines and read the modes back from it (nodes whose PFs have no devlink, such as the e2e's virtual node)")
	cni := cniFlags(fs)
	draOpts := draFlags(fs)
	showVersion := observeFlags(fs, &c)
	newLogger := logging.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *showVersion {
		return c, errVersion
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	o.CNI = cni()
	o.DRA = draOpts()
	admin, err := vfadmin.New(*vfAdmin, o.SysfsRoot, o.Netns)
	if err != nil {
		return c, fmt.Errorf("--vf-admin: %w", err)
	}
	o.VFAdmin = admin
	if o.ESwitch, err = devlink.New(*eswitch); err != nil {
		return c, fmt.Errorf("--devlink: %w", err)
	}
	logger, err := newLogger(errOut)
	o.Logger = logger
	if err != nil {
		return c, err
	}
	return c, checkIntervals(c.opts)
}

// checkIntervals rejects intervals a ticker cannot run with.
func checkIntervals(o agent.Options) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--poll-interval", o.PollInterval}, {"--rescan-interval", o.RescanInterval}, {"--devinfo-gc-interval", o.GCInterval}, {"--ledger-interval", o.LedgerInterval}} {
		if d.v <= 0 {
			return fmt.Errorf("%s %v: want a positive duration", d.flag, d.v)
		}
	}
	return nil
}

// draFlags declares the DRA driver's flags; the returned function gives
// its options once the flags are parsed, nil when --dra=false. The node
// name and API server client are the CNI side's flags.
func draFlags(fs *flag.FlagSet) func() *agent.DRAOptions {
	var o agent.DRAOptions
	enabled := fs.Bool("dra", false, "serve the pools whose mode is dra through the DRA driver (ResourceSlices, NodePrepareResources)")
	fs.StringVar(&o.DriverName, "dra-driver-name", dra.DefaultDriverName, "the DRA driver's name, the domain of its device attributes")
	fs.StringVar(&o.RegistrarDir, "dra-registrar-dir", dra.DefaultRegistrarDir, "kubelet's plugin registration directory")
	fs.StringVar(&o.PluginDir, "dra-plugin-dir", "", "the DRA driver's socket and checkpoint directory (default: /var/lib/kubelet/plugins/<driver name>)")
	fs.BoolVar(&o.EvictDeadPF, "dra-evict-dead-pf", false, "taint the VFs of a PF whose link is down or that left the PCI bus NoExecute instead of NoSchedule: Kubernetes evicts the pods whose claims hold them")
	return func() *agent.DRAOptions {
		if !*enabled {
			return nil
		}
		o.NodeName = fs.Lookup("node-name").Value.String()
		o.Kubeconfig = fs.Lookup("kubeconfig").Value.String()
		return &o
	}
}

// cniFlags declares the CNI side's flags; the returned function gives its
// options once the flags are parsed, nil when --cni=false.
func cniFlags(fs *flag.FlagSet) func() *daemon.Options {
	var o daemon.Options
	enabled := fs.Bool("cni", true, "serve the CNI delegating plugin (false: device plugins only, as the SR-IOV network device plugin)")
	fs.StringVar(&o.ConfDir, "cni-conf-dir", daemon.DefaultConfDir, "CNI configuration directory: the default network's and on-disk delegate configurations")
	fs.StringVar(&o.OutputDir, "cni-output-dir", "", "directory hwnet's own CNI configuration is written to (default: --cni-conf-dir)")
	fs.StringVar(&o.ConfFileName, "cni-conf-file", daemon.DefaultConfFileName, "name of hwnet's CNI configuration file")
	fs.StringVar(&o.DefaultNetwork, "cni-default-network", "", "cluster-wide default network, by file or network name (default: the first configuration in --cni-conf-dir)")
	fs.StringVar(&o.SocketPath, "cni-socket", daemon.DefaultSocketPath, "socket the hwnet CNI shim forwards requests to")
	fs.StringVar(&o.CacheDir, "cni-cache-dir", daemon.DefaultCacheDir, "attachment records, shared with the shim for DEL without the agent")
	fs.StringVar(&o.RuntimeCacheDir, "cni-runtime-cache-dir", "", "the container runtime's libcni cache, read to delete pods the runtime attached before hwnet's CNI config was written (default: libcni's "+cnicache.DefaultDir+")")
	fs.StringVar(&o.DevinfoDir, "cni-devinfo-dir", daemon.DefaultDevinfoDir, "directory of the device-info files written for CNI delegates")
	o.AllowedNamespaces = netconf.AllowedNamespaces{"default"}
	fs.Var(&o.AllowedNamespaces, netconf.AllowedNamespacesFlag, netconf.AllowedNamespacesUsage)
	fs.DurationVar(&o.AgentWait, "cni-agent-wait", daemon.DefaultAgentWait, "how long the shim's ADD waits for an agent that is not running")
	fs.StringVar(&o.CRISocket, "cri-socket", daemon.DefaultCRISocket, "the container runtime's CRI socket, asked which pod sandboxes exist (\"\": no reconcile of leftover attachments)")
	fs.DurationVar(&o.ReconcileInterval, "cni-reconcile-interval", daemon.DefaultReconcileInterval, "how often attachments of sandboxes the runtime no longer has are torn down (0: never)")
	fs.DurationVar(&o.PluginTimeout, "cni-plugin-timeout", daemon.DefaultPluginTimeout, "how long one delegate plugin may run before it is killed and the attachment fails naming it (0: no limit)")
	fs.DurationVar(&o.StatusReuse, "cni-status-reuse", daemon.DefaultStatusReuse, "how long a network's passed CNI STATUS answers the runtime's next asks (every 5 s) without running its plugins again, while their files and configuration stay the same; a failure they would find elsewhere is reported up to this late (0: run them at every ask)")
	fs.StringVar(&o.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default: $NODE_NAME)")
	fs.StringVar(&o.PodsAPISocket, "pods-api-socket", daemon.DefaultPodsAPISocket, "kubelet's Pods API socket, preferred over watching pods on the API server")
	fs.StringVar(&o.ShimSource, "cni-install-shim", "", "hwnet shim binary to copy into --cni-bin-dir before hwnet's CNI config is written (empty: installed by other means)")
	fs.StringVar(&o.BinDir, "cni-bin-dir", "/opt/cni/bin", "the runtime's CNI plugin directory, where the shim is installed")
	fs.StringVar(&o.NetworkAPISocket, "cri-network-socket", daemon.DefaultNetworkAPISocket, "socket of the CRI network API (hwnetctl network), mode 0600 (see --socket-group; empty: not served)")
	fs.StringVar(&o.NetworkDir, "cri-network-dir", daemon.DefaultNetworkDir, "directory keeping the networks set through the CRI network API")
	fs.StringVar(&o.SocketGroup, "socket-group", "", "group (GID, or a name in the agent image's /etc/group) whose members may use --cni-socket and --cri-network-socket besides root: "+
		"sockets 0660 and their directory 0750 owned by it (empty: root only, 0600 and 0700)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: in-cluster)")
	return func() *daemon.Options {
		if !*enabled {
			return nil
		}
		return &o
	}
}

// errVersion is parseFlags' answer to --version.
var errVersion = errors.New("version requested")

// defaultProbeAddr is where kubelet's probes reach the agent on the host
// network.
const defaultProbeAddr = ":8141"

// observeFlags declares the probe, metrics, pprof and --version flags.
func observeFlags(fs *flag.FlagSet, c *command) *bool {
	o := &c.opts
	fs.StringVar(&o.ProbeAddr, "probe-addr", defaultProbeAddr, "address of /healthz and /readyz (empty: none)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", "", "address of the Prometheus /metrics endpoint, e.g. :8142 (empty: none; the agent is on the host network)")
	fs.BoolVar(&o.Pprof, "pprof", false, "serve Go's profiles under /debug/pprof/ on --metrics-addr")
	fs.BoolVar(&c.uninstall, "uninstall", false, "remove hwnet's CNI configuration, shim, sockets, device-info files and records from the node, "+
		"then answer /readyz until stopped (deploy/uninstall/); refused while hwnet-agent runs")
	return fs.Bool("version", false, "print the version and exit")
}
