// Command hwnet-cluster brings hwnet's end-to-end Kubernetes cluster up
// (test/e2e/cluster), shows it, runs commands inside its namespaces and
// tears it down.
//
//	hwnet-cluster [flags] up          build the images, bring the cluster up (or reuse it);
//	                                  --nodes N for a control plane and N-1 workers
//	hwnet-cluster [flags] demo        up, then deploy hwnet and run a CNF pod (make demo)
//	hwnet-cluster [flags] down        stop and remove everything
//	hwnet-cluster [flags] status      processes, kube-apiserver and node readiness
//	hwnet-cluster [flags] kubectl -- ARGS
//	hwnet-cluster [flags] exec -- COMMAND [ARGS]    (--node NAME: in a worker's namespaces)
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	// kubectl and exec pass their command's exit status on, having shown
	// its output; any other failure is said.
	exit, passthrough := err.(*exec.ExitError)
	switch {
	case passthrough:
		os.Exit(exit.ExitCode())
	case err != nil:
		fmt.Fprintln(os.Stderr, "hwnet-cluster:", err)
		os.Exit(1)
	}
}

type options struct {
	cfg       cluster.Config
	imageDir  string
	specFile  string
	nodes     int
	node      string
	skipBuild bool
	repo      string
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("hwnet-cluster", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.cfg.StateDir, "state-dir", cluster.DefaultStateDir, "the cluster's state directory")
	fs.StringVar(&o.cfg.KubeBinDir, "kube-bin-dir", "", "Kubernetes binaries; default $HWNET_KUBE_CACHE or /var/cache/hwnet-ci/kube/"+cluster.KubeVersion+"/bin")
	fs.StringVar(&o.cfg.CNIBinDir, "cni-bin-dir", "", "reference CNI plugins; default /var/cache/hwnet-ci/cni-bin/"+cluster.CNIPluginsVersion)
	fs.StringVar(&o.imageDir, "image-dir", cluster.DefaultImageDir, "up: where the image tarballs are built")
	fs.StringVar(&o.specFile, "spec", "", "up: virtual node spec (YAML or JSON); default: the default node named "+cluster.DefaultNodeName)
	fs.StringVar(&o.cfg.ContainerdVersion, "containerd", "", "up: the containerd `release` (built by make containerd-cdi), e.g. "+
		cluster.LegacyContainerdVersion+"; default $"+cluster.ContainerdVersionEnv+" or "+cluster.DefaultContainerdVersion)
	fs.IntVar(&o.nodes, "nodes", 1, "up: the number of nodes: a control plane and N-1 workers, each with its own virtual node "+
		"(the default hardware; from 3 nodes, the last has no SR-IOV hardware at all)")
	fs.StringVar(&o.node, "node", "", "exec: the node whose namespaces the command runs in; default the control plane's")
	fs.BoolVar(&o.skipBuild, "no-images", false, "up: do not build or import images")
	fs.StringVar(&o.repo, "repo", ".", "up: the hwnet repository the images are built from")
	ref := fs.String("ref", "hwnet:dev", "image: the tag of hwnet's image")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: hwnet-cluster [flags] up|demo|down|status|image|kubectl -- ARGS|exec -- COMMAND")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.cfg.Progress = os.Stdout
	o.cfg.Repo = o.repo
	switch cmd, rest := fs.Arg(0), dropDashes(fs.Args()); cmd {
	case "up":
		return up(ctx, o)
	case "demo":
		return demo(ctx, o)
	case "down":
		return down(ctx, o.cfg)
	case "status":
		return status(ctx, o.cfg)
	case "image":
		return releaseImages(ctx, o.repo, o.imageDir, *ref)
	case "kubectl":
		return inside(ctx, o.cfg, "", append([]string{"kubectl"}, rest...))
	case "exec":
		return inside(ctx, o.cfg, o.node, rest)
	default:
		fs.Usage()
		return fmt.Errorf("unknown command %q", cmd)
	}
}

// releaseImages writes hwnet's image for this machine's CPU as a
// docker-archive, and for amd64 and arm64 as one OCI image index.
func releaseImages(ctx context.Context, repo, dir, ref string) error {
	tarball, err := image.Release(ctx, repo, dir, ref)
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (load with docker load, podman load or ctr -n k8s.io images import)\n", ref, tarball)
	index, err := image.ReleaseIndex(ctx, repo, dir, ref, []string{"amd64", "arm64"})
	if err != nil {
		return err
	}
	fmt.Printf("%s for linux/amd64 and linux/arm64: %s (an OCI image layout: skopeo copy oci-archive:%s docker://REGISTRY/hwnet:TAG, or ctr -n k8s.io images import)\n", ref, index, index)
	return nil
}

// dropDashes returns the arguments after the command and an optional "--".
func dropDashes(args []string) []string {
	if len(args) < 2 {
		return nil
	}
	if args[1] == "--" {
		return args[2:]
	}
	return args[1:]
}

func up(ctx context.Context, o options) error {
	c, err := upCluster(ctx, o)
	if err != nil {
		return err
	}
	usage(c)
	return nil
}

// upCluster builds the images and brings the cluster up, or returns the
// one running in the state directory.
func upCluster(ctx context.Context, o options) (*cluster.Cluster, error) {
	if o.specFile != "" {
		data, err := os.ReadFile(o.specFile)
		if err != nil {
			return nil, err
		}
		if o.cfg.Spec, err = virtualnode.ParseSpec(data); err != nil {
			return nil, err
		}
	}
	if o.nodes < 1 {
		return nil, fmt.Errorf("--nodes %d: a cluster has at least 1 node", o.nodes)
	}
	o.cfg.Workers = cluster.WorkerSpecs(cmp.Or(specName(o.cfg.Spec), cluster.DefaultNodeName), o.nodes)
	if !o.skipBuild {
		start := time.Now()
		images, err := image.Images(ctx, o.repo, o.imageDir)
		if err != nil {
			return nil, err
		}
		fmt.Printf("images: built in %s (%.1fs)\n", o.imageDir, time.Since(start).Seconds())
		o.cfg.Images, o.cfg.SandboxImage = images, image.Pause
	}
	c, err := cluster.Up(ctx, o.cfg)
	if err != nil && c != nil {
		err = fmt.Errorf("%w\nlogs: %s; remove the half-up cluster with: hwnet-cluster --state-dir %s down", err, c.LogDir(), c.StateDir())
	}
	return c, err
}

// specName is the spec's node name, "" for none.
func specName(spec *virtualnode.Spec) string {
	if spec == nil {
		return ""
	}
	return spec.Name
}

func down(ctx context.Context, cfg cluster.Config) error {
	c, err := cluster.Open(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("no cluster in %s: %w", cfg.StateDir, err)
	}
	c.SetProgress(cfg.Progress)
	return c.Down(ctx)
}

func status(ctx context.Context, cfg cluster.Config) error {
	c, err := cluster.Open(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("no cluster in %s: %w", cfg.StateDir, err)
	}
	c.Status(ctx).Print(os.Stdout)
	return nil
}

// inside runs argv in the namespaces of the named node ("" for the
// control plane's) with the terminal attached.
func inside(ctx context.Context, cfg cluster.Config, node string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("exec: no command given")
	}
	c, err := cluster.Open(cfg.StateDir)
	if err != nil {
		return fmt.Errorf("no cluster in %s: %w", cfg.StateDir, err)
	}
	i := slices.IndexFunc(c.Nodes(), func(n *cluster.Cluster) bool { return node == "" || n.NodeName() == node })
	if i < 0 {
		return fmt.Errorf("--node %q: the cluster in %s has no such node", node, cfg.StateDir)
	}
	cmd := c.Nodes()[i].Command(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
