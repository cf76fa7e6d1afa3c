package cluster

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// vnodeKernelPackage is the daemon that does for the virtual node what
// the kernel does for real VFs and veths cannot: give a VF's netdev back
// to the node when the pod network namespace holding it is destroyed.
// Without it, a VF whose pod's netns went before the VF was moved back
// (a sandbox torn down while hwnet-agent was down) would be lost for
// good, which no real node sees.
const vnodeKernelPackage = "./cmd/hwnet-vnode-kernel"

// DevlinkRecord is the devlink record, as the node sees it, whose SF port
// adds and dels hwnet-vnode-kernel enacts: a test gives hwnet-agent
// --devlink=record:DevlinkRecord for the node's mlx5 PFs to get SFs.
const DevlinkRecord = "/var/lib/hwnet/devlink-e2e.jsonl"

// startVNodeKernel builds hwnet-vnode-kernel from repo into the state
// directory and starts it on the host, where it reaches the node's netns
// by name, in the cluster's cgroups; it reads DevlinkRecord where the
// host has the node's /var/lib.
func (c *Cluster) startVNodeKernel(ctx context.Context, repo string) error {
	bin, err := buildVNodeKernel(ctx, repo, c.p.bin())
	if err != nil {
		return err
	}
	record := filepath.Join(c.p.varLib(), strings.TrimPrefix(DevlinkRecord, "/var/lib/"))
	args := []string{bin, "--node-dir", c.p.node(), "--dev-dir", c.p.dev(), "--devlink-record", record}
	p, err := startDetached(vnodeKernel, args, c.p.log(vnodeKernel))
	if err != nil {
		return err
	}
	c.st.setProcess(p)
	return errors.Join(joinCgroups(c.st.CgroupRoot, p.PID), c.saveState())
}

// buildVNodeKernel builds the daemon into dir with the go command, which
// reuses its build cache.
func buildVNodeKernel(ctx context.Context, repo, dir string) (string, error) {
	if repo == "" {
		var err error
		if repo, err = findRepo(); err != nil {
			return "", err
		}
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command builds %s: %w", vnodeKernel, err)
	}
	bin := filepath.Join(dir, vnodeKernel)
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, vnodeKernelPackage)
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s in %s: %w\n%s", vnodeKernelPackage, repo, err, out)
	}
	return bin, nil
}

// PauseVNodeKernel stops the node's hwnet-vnode-kernel (SIGSTOP) until
// resume is called (SIGCONT): the sysfs writes made meanwhile take effect
// only then, as with a driver that takes seconds to remove or create VFs,
// where the emulation otherwise takes a moment.
func (c *Cluster) PauseVNodeKernel() (resume func() error, err error) {
	p := c.st.process(vnodeKernel)
	if !p.running() {
		return nil, fmt.Errorf("pause %s: the cluster in %s runs none", vnodeKernel, c.p.dir)
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return nil, err
	}
	return func() error { return p.signal(syscall.SIGCONT) }, nil
}
