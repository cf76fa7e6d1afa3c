package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// bringUpWorkers brings the workers of cfg up at once, once the control
// plane is: each is a node of its own (virtual node, namespaces, kernel
// emulation, containerd and kubelet) joined to the control plane by the
// fabric. Each worker's state is saved before anything of it exists, so
// that Down removes a half-up worker too.
func (c *Cluster) bringUpWorkers(ctx context.Context, cfg Config) error {
	if len(cfg.Workers) == 0 {
		return nil
	}
	start := time.Now()
	for i, spec := range cfg.Workers {
		w, err := c.prepareWorker(i+1, spec.Name)
		if err != nil {
			return err
		}
		c.workers = append(c.workers, w)
	}
	err := atOnce(c.workers, func(w *Cluster) error { return w.bringUpWorker(ctx, cfg, c, cfg.Workers[w.st.Index-1]) })
	if err != nil {
		return err
	}
	c.say("%d workers Ready (%.1fs)", len(c.workers), time.Since(start).Seconds())
	return nil
}

// prepareWorker makes worker index's empty state directory and saves its
// state there.
func (c *Cluster) prepareWorker(index int, name string) (*Cluster, error) {
	p := c.p.worker(name)
	if err := makeEmptyDir(p.dir); err != nil {
		return nil, err
	}
	st := &state{
		Name:              name,
		Netns:             virtualnode.NetnsPrefix + name,
		CgroupRoot:        cgroupRoot(name),
		KubeBinDir:        c.st.KubeBinDir,
		Containerd:        c.st.Containerd,
		ContainerdVersion: c.st.ContainerdVersion,
		Index:             index,
	}
	w := newCluster(p, st, c.progress)
	return w, w.saveState()
}

func (w *Cluster) bringUpWorker(ctx context.Context, cfg Config, cp *Cluster, spec *virtualnode.Spec) error {
	s := func() settings { return w.settings(cfg.SandboxImage) }
	steps := []struct {
		what string
		run  func() error
	}{
		{"virtual node built", func() error { return w.buildNode(ctx, spec) }},
		{"namespaces ready, joined to the fabric", func() error { return w.setUpWorkerNamespaces(ctx, cfg, cp) }},
		{"the virtual node's kernel emulation started", func() error { return w.startVNodeKernel(ctx, cfg.Repo) }},
		{"containerd up, images imported", func() error { return w.startRuntime(ctx, s(), cfg.Images) }},
		{"kubelet up, node Ready", func() error { return w.startKubelet(ctx, s()) }},
	}
	for _, step := range steps {
		if err := w.step("worker "+w.st.Name+": "+step.what, step.run); err != nil {
			return fmt.Errorf("worker %s: %w", w.st.Name, err)
		}
	}
	return nil
}

// setUpWorkerNamespaces is setUpNamespaces for a worker: its node IP is
// its fabric address, the kubernetes Service's address leads to the
// control plane, and its credentials come from the control plane's PKI.
func (w *Cluster) setUpWorkerNamespaces(ctx context.Context, cfg Config, cp *Cluster) error {
	if err := createCgroups(w.st.CgroupRoot); err != nil {
		return err
	}
	ip, err := joinFabric(cp.st.Netns, w.st.Netns, w.st.Index)
	if err != nil {
		return err
	}
	w.st.NodeIP = ip.String()
	if err := routePodSubnets(w.st.Netns, w.st.Index, len(cp.st.Workers)+1); err != nil {
		return err
	}
	if err := forwardServiceAddress(ctx, w.st.Netns, w.st.Index); err != nil {
		return err
	}
	if err := w.writeFiles(cfg, func() error { return w.copyCredentials(cp) }); err != nil {
		return err
	}
	return w.enterNamespaces(ctx)
}

// copyCredentials copies the CA, the worker's kubelet kubeconfig and the
// admin's from the control plane, whose state directory the worker's
// mount namespace may hide.
func (w *Cluster) copyCredentials(cp *Cluster) error {
	copies := []struct{ from, to string }{
		{cp.p.pkiFile("ca.crt"), w.p.pkiFile("ca.crt")},
		{cp.p.workerKubeconfig(w.st.Name), w.p.kubeconfig("kubelet")},
		{cp.p.kubeconfig("admin"), w.p.kubeconfig("admin")},
	}
	for _, cp := range copies {
		if err := errors.Join(copyFile(cp.from, cp.to), os.Chmod(cp.to, 0o600)); err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
	}
	return nil
}

// startRuntime starts containerd and imports the images.
func (w *Cluster) startRuntime(ctx context.Context, s settings, images []string) error {
	p, err := w.startDaemon(containerd, s.containerdArgv())
	if err != nil {
		return err
	}
	err = waitFor(ctx, "containerd's socket", p, daemonTimeout, func(ctx context.Context) error {
		return w.dialUnix(ctx, containerdSocket)
	})
	if err != nil {
		return err
	}
	return w.importImages(ctx, images)
}

// startKubelet starts kubelet and waits until its node is Ready.
func (w *Cluster) startKubelet(ctx context.Context, s settings) error {
	since := time.Now()
	p, err := w.startDaemon(kubelet, s.kubeletArgv())
	if err != nil {
		return err
	}
	return waitFor(ctx, "node "+w.st.Name+" to be Ready", p, nodeReadyTimeout, w.nodeReady(since))
}
