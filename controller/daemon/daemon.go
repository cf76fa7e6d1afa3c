// Package daemon is hwnet-controller's process: its flags, clients, leader
// election and probes around the KEP-3698 PodNetwork controller.
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/controller"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/internal/logging"
	"github.com/hwnet-io/hwnet/internal/version"
)

// options are hwnet-controller's flags.
type options struct {
	kubeconfig       string
	disableDefault   bool
	allowed          netconf.AllowedNamespaces
	election         controller.Election
	probeAddr        string
	logger           *slog.Logger
	showVersion      bool
	leaderElectionOn bool
}

// Main runs hwnet-controller and returns the process exit code. --version
// answers on out, everything else on errOut.
func Main(ctx context.Context, args []string, out, errOut io.Writer) int {
	o, err := parseFlags(args, errOut)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case err != nil:
		fmt.Fprintf(errOut, "hwnet-controller: %v\n", err)
		return 2
	case o.showVersion:
		fmt.Fprintln(out, "hwnet-controller", version.Get())
		return 0
	}
	if err := run(ctx, o); err != nil {
		o.logger.Error("hwnet-controller failed", "err", err)
		return 1
	}
	return 0
}

func parseFlags(args []string, errOut io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("hwnet-controller", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.Usage = func() {
		fmt.Fprintln(errOut, "hwnet-controller: the KEP-3698 PodNetwork controller (conditions, in-use finalizers, the default PodNetwork, pods' network scheduling gates)\n\nflags:")
		fs.PrintDefaults()
	}
	hostname, _ := os.Hostname()
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file (default: the pod's service account)")
	fs.BoolVar(&o.disableDefault, "disable-default-podnetwork-creation", false, "do not create the \"default\" PodNetwork, nor recreate it when deleted (KEP-3698)")
	o.allowed = netconf.AllowedNamespaces{"default"}
	fs.Var(&o.allowed, netconf.AllowedNamespacesFlag, netconf.AllowedNamespacesUsage+" (give it the agents' value)")
	fs.BoolVar(&o.leaderElectionOn, "leader-elect", true, "run only while holding the Lease, so replicas take over from each other")
	fs.StringVar(&o.election.Namespace, "leader-elect-namespace", envOr("POD_NAMESPACE", "kube-system"), "namespace of the Lease")
	fs.StringVar(&o.election.Name, "leader-elect-name", "hwnet-controller", "name of the Lease")
	fs.StringVar(&o.election.Identity, "leader-elect-identity", hostname, "this replica's identity in the Lease")
	fs.DurationVar(&o.election.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a leader's lease lasts unrenewed")
	fs.StringVar(&o.probeAddr, "probe-addr", ":8143", "address of /healthz and /readyz (\"\" serves none)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	newLogger := logging.Flags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	logger, err := newLogger(errOut)
	o.logger = logger
	return o, err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(ctx context.Context, o options) error {
	cfg, err := kubeclient.RESTConfig(o.kubeconfig)
	if err != nil {
		return err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kubernetes client: %w", err)
	}
	ctrl, err := newController(cfg, kc, o)
	if err != nil {
		return err
	}
	if err := serveProbes(ctx, o.probeAddr, o.logger); err != nil {
		return err
	}
	if !o.leaderElectionOn {
		return ctrl.Run(ctx)
	}
	o.logger.Info("joining the leader election", "lease", o.election.Namespace+"/"+o.election.Name, "identity", o.election.Identity)
	return controller.RunElected(ctx, kc, o.election, ctrl.Run)
}
