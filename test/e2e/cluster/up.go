package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// Up brings a cluster up in cfg.StateDir and waits until its node is Ready
// and pods can be created in the default namespace.
//
// When a healthy cluster already runs there, Up imports cfg.Images into it
// and returns it, ignoring the rest of cfg; a broken one is torn down
// first. When bring-up fails, Up returns the error with the half-up
// cluster, whose logs tell why; its Down removes it.
func Up(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if c, err := reuse(ctx, cfg); c != nil || err != nil {
		return c, err
	}
	start := time.Now()
	if err := prerequisites(ctx, cfg); err != nil {
		return nil, err
	}
	version, err := containerdVersion(ctx, cfg.Containerd)
	if err != nil {
		return nil, err
	}
	c, err := prepare(cfg, version)
	if err != nil {
		return nil, err
	}
	if err := c.bringUp(ctx, cfg); err != nil {
		return c, fmt.Errorf("cluster %s: %w", c.p.dir, err)
	}
	if err := c.bringUpWorkers(ctx, cfg); err != nil {
		return c, fmt.Errorf("cluster %s: %w", c.p.dir, err)
	}
	c.say("up in %.1fs: %s Ready, containerd %s, state in %s", time.Since(start).Seconds(), c.nodeList(),
		c.st.ContainerdVersion, c.p.dir)
	return c, nil
}

// reuse returns the healthy cluster running in cfg.StateDir, or nil after
// removing a broken one.
func reuse(ctx context.Context, cfg Config) (*Cluster, error) {
	c, err := Open(cfg.StateDir)
	if isNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.SetProgress(cfg.Progress)
	if err := c.sameNodes(cfg); err != nil {
		c.say("the cluster in %s is another (%v): removing it", c.p.dir, err)
		return nil, c.Down(ctx)
	}
	if err := c.healthy(ctx); err != nil {
		c.say("the cluster in %s is broken (%v): removing it", c.p.dir, err)
		return nil, c.Down(ctx)
	}
	c.say("reusing the cluster running in %s", c.p.dir)
	return c, c.importEverywhere(ctx, cfg.Images)
}

// sameNodes checks that the running cluster has the nodes cfg asks for.
func (c *Cluster) sameNodes(cfg Config) error {
	want := []string{cfg.Spec.Name}
	for _, spec := range cfg.Workers {
		want = append(want, spec.Name)
	}
	if have := append([]string{c.st.Name}, c.st.Workers...); !slices.Equal(have, want) {
		return fmt.Errorf("nodes %v, not %v", have, want)
	}
	return nil
}

// nodeList names the nodes with their IPs.
func (c *Cluster) nodeList() string {
	var names []string
	for _, n := range c.Nodes() {
		names = append(names, fmt.Sprintf("node %s at %s", n.st.Name, n.st.NodeIP))
	}
	return strings.Join(names, ", ")
}

func prerequisites(ctx context.Context, cfg Config) error {
	return stepFunc(cfg.Progress, "prerequisites checked", func() error {
		for _, tarball := range cfg.Images {
			if _, err := os.Stat(tarball); err != nil {
				return fmt.Errorf("image: %w", err)
			}
		}
		if err := checkKubeBinaries(cfg.KubeBinDir); err != nil {
			return err
		}
		if err := ensureRuntime(ctx, cfg.Progress); err != nil {
			return err
		}
		if cfg.Repo == "" {
			cfg.Repo, _ = findRepo() // needed only when plugins are missing
		}
		return ensureCNIPlugins(ctx, cfg)
	})
}

// prepare makes the empty state directory and records the cluster's
// names in it before anything exists that Down would have to remove.
func prepare(cfg Config, runtimeVersion string) (*Cluster, error) {
	if err := makeEmptyDir(cfg.StateDir); err != nil {
		return nil, err
	}
	st := &state{
		Name:              cfg.Spec.Name,
		Netns:             virtualnode.NetnsPrefix + cfg.Spec.Name,
		CgroupRoot:        cgroupRoot(cfg.Spec.Name),
		KubeBinDir:        cfg.KubeBinDir,
		Containerd:        cfg.Containerd,
		ContainerdVersion: runtimeVersion,
	}
	for _, spec := range cfg.Workers {
		st.Workers = append(st.Workers, spec.Name)
	}
	c := newCluster(paths{dir: cfg.StateDir}, st, cfg.Progress)
	return c, c.saveState()
}

// makeEmptyDir makes dir, or accepts it when it exists and is empty.
func makeEmptyDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("state directory %s holds no cluster state but is not empty; remove it first", dir)
	}
	return nil
}

func (c *Cluster) bringUp(ctx context.Context, cfg Config) error {
	// The settings need the node IP, which the namespaces step finds.
	s := func() settings { return c.settings(cfg.SandboxImage) }
	steps := []struct {
		what string
		run  func() error
	}{
		{"virtual node " + c.st.Name + " built", func() error { return c.buildNode(ctx, cfg.Spec) }},
		{"namespaces ready", func() error { return c.setUpNamespaces(ctx, cfg) }},
		{"the virtual node's kernel emulation started", func() error { return c.startVNodeKernel(ctx, cfg.Repo) }},
		{"etcd and containerd up", func() error { return c.startStorageAndRuntime(ctx, s()) }},
		{"kube-apiserver up, images imported", func() error { return c.startAPIServer(ctx, s(), cfg.Images) }},
		{"controllers, scheduler and kubelet up, node Ready", func() error { return c.startNode(ctx, s()) }},
	}
	for _, step := range steps {
		if err := c.step(step.what, step.run); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) buildNode(ctx context.Context, spec *virtualnode.Spec) error {
	db, err := hwdb.Open()
	if err != nil {
		return err
	}
	c.node, err = virtualnode.Build(ctx, spec, db, virtualnode.Options{Dir: c.p.node(), Links: true})
	return err
}

func (c *Cluster) settings(sandboxImage string) settings {
	return settings{paths: c.p, name: c.st.Name, nodeIP: c.st.NodeIP, kubeBinDir: c.st.KubeBinDir,
		cgroupRoot: c.st.CgroupRoot, sandboxImage: sandboxImage, containerd: c.st.Containerd,
		containerdVersion: c.st.ContainerdVersion, podSubnet: podSubnetOf(c.st.Index).String()}
}

// setUpNamespaces makes the cgroups, the node IP, every file the
// components read, the holder and its mount namespace.
func (c *Cluster) setUpNamespaces(ctx context.Context, cfg Config) error {
	if err := createCgroups(c.st.CgroupRoot); err != nil {
		return err
	}
	ip, err := c.controlPlaneNetwork()
	if err != nil {
		return err
	}
	c.st.NodeIP = ip.String()
	pki := func() error { return writePKI(c.p, c.st.Name, ip, c.st.Workers) }
	if err := c.writeFiles(cfg, pki); err != nil {
		return err
	}
	return c.enterNamespaces(ctx)
}

// controlPlaneNetwork sets up the control plane's network and returns its
// node IP: the management NIC's address alone, the fabric's with workers.
func (c *Cluster) controlPlaneNetwork() (net.IP, error) {
	ip, err := setUpNetwork(c.st.Netns)
	if err != nil || len(c.st.Workers) == 0 {
		return ip, err
	}
	if ip, err = setUpFabricBridge(c.st.Netns); err != nil {
		return nil, err
	}
	return ip, routePodSubnets(c.st.Netns, 0, len(c.st.Workers)+1)
}

// enterNamespaces starts the holder and sets up its mount namespace.
func (c *Cluster) enterNamespaces(ctx context.Context) error {
	var err error
	if c.st.Holder, err = startHolder(ctx, c.p, c.st.Netns); c.st.Holder == nil {
		return err
	}
	if err == nil { // only then is it the holder's own mount namespace
		c.st.MountNS, _ = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", c.st.Holder.PID))
	}
	// Saved also when the holder failed, for Down to stop it.
	if err := errors.Join(err, joinCgroups(c.st.CgroupRoot, c.st.Holder.PID), c.saveState()); err != nil {
		return err
	}
	return inNamespaces(c.st.Holder.PID, func() error { return setUpMounts(c.p, c.node.SysRoot()) })
}

// writeFiles writes every file the node's components read; credentials
// writes the node's certificates and kubeconfigs.
func (c *Cluster) writeFiles(cfg Config, credentials func() error) error {
	dirs := []string{c.p.logs(), c.p.pki(), c.p.config(), c.p.varLib(), c.p.varLog(), c.p.cniConf(), c.p.cniBin(), c.p.sysStaging()}
	for _, dir := range overlaid() {
		dirs = append(dirs, c.p.overlayUpper(dir), c.p.overlayWork(dir))
	}
	for _, dir := range dirs {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	s := c.settings(cfg.SandboxImage)
	writers := []func() error{
		credentials,
		s.writeContainerdConfig, s.writeKubeletConfig, s.writePodNetwork,
		func() error { return writeKernelTunables(c.p.configFile("sysctl")) },
		func() error { return c.node.MirrorDevices(c.p.dev()) },
		func() error { return copyCNIPlugins(cfg.CNIBinDir, c.p.cniBin()) },
	}
	for _, write := range writers {
		if err := write(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) startStorageAndRuntime(ctx context.Context, s settings) error {
	etcdProc, err := c.startDaemon(etcd, s.etcdArgv())
	if err != nil {
		return err
	}
	containerdProc, err := c.startDaemon(containerd, s.containerdArgv())
	if err != nil {
		return err
	}
	return parallel(
		func() error {
			return waitFor(ctx, "etcd to be healthy", etcdProc, daemonTimeout, func(ctx context.Context) error {
				return c.httpGet(ctx, etcdClientURL+"/health")
			})
		},
		func() error {
			return waitFor(ctx, "containerd's socket", containerdProc, daemonTimeout, func(ctx context.Context) error {
				return c.dialUnix(ctx, containerdSocket)
			})
		})
}

func (c *Cluster) startAPIServer(ctx context.Context, s settings, images []string) error {
	apiserver, err := c.startDaemon(kubeAPIServer, s.apiserverArgv())
	if err != nil {
		return err
	}
	return parallel(
		func() error {
			return waitFor(ctx, "kube-apiserver to be ready", apiserver, apiserverTimeout, c.apiserverReady)
		},
		func() error { return c.importImages(ctx, images) })
}

func (c *Cluster) startNode(ctx context.Context, s settings) error {
	since := time.Now()
	daemons := map[string][]string{
		controllerManager: s.controllerManagerArgv(),
		scheduler:         s.schedulerArgv(),
		kubelet:           s.kubeletArgv(),
	}
	procs := map[string]*process{}
	for _, name := range []string{controllerManager, scheduler, kubelet} {
		p, err := c.startDaemon(name, daemons[name])
		if err != nil {
			return err
		}
		procs[name] = p
	}
	return parallel(
		func() error {
			return waitFor(ctx, "the default service account", procs[controllerManager], daemonTimeout, c.defaultServiceAccount)
		},
		func() error {
			return waitFor(ctx, "kube-scheduler to be healthy", procs[scheduler], daemonTimeout, func(ctx context.Context) error {
				return c.httpGet(ctx, "https://"+schedulerPort+"/healthz")
			})
		},
		func() error {
			return waitFor(ctx, "node "+c.st.Name+" to be Ready", procs[kubelet], nodeReadyTimeout, c.nodeReady(since))
		})
}

// healthy checks that every process of the cluster runs and
// kube-apiserver is ready.
func (c *Cluster) healthy(ctx context.Context) error {
	if !c.st.Holder.running() {
		return errors.New("its namespace holder is not running")
	}
	for _, name := range c.daemons() {
		if p := c.st.process(name); !p.running() {
			return fmt.Errorf("%s is not running; logs in %s", name, c.p.logs())
		}
	}
	for _, w := range c.workers {
		if err := w.healthy(ctx); err != nil {
			return fmt.Errorf("node %s: %w", w.st.Name, err)
		}
	}
	if c.st.worker() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.apiserverReady(ctx)
}

// atOnce runs fn for each node at once and returns their errors joined.
func atOnce(nodes []*Cluster, fn func(*Cluster) error) error {
	runs := make([]func() error, len(nodes))
	for i, n := range nodes {
		runs[i] = func() error { return fn(n) }
	}
	return parallel(runs...)
}

// parallel runs fns at once and returns their errors joined.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() { errs[i] = fn() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// stepFunc is Cluster.step for before a Cluster exists.
func stepFunc(progress io.Writer, what string, fn func() error) error {
	start := time.Now()
	if err := fn(); err != nil {
		return err
	}
	fmt.Fprintf(progress, "cluster: %s (%.1fs)\n", what, time.Since(start).Seconds())
	return nil
}
