package cluster

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"time"
)

// Status is what Status finds of a cluster.
type Status struct {
	StateDir string
	Node     string
	NodeIP   string
	// Containerd is the runtime's version.
	Containerd string
	// Processes are the holder and the daemons.
	Processes []ProcessStatus
	// APIServerReady is kube-apiserver's /readyz answer; nil when ready.
	APIServerReady error
	// NodeReady is nil when the node is Ready.
	NodeReady error
	// Workers are the statuses of the control plane's workers.
	Workers []Status
}

// ProcessStatus is one process of the cluster.
type ProcessStatus struct {
	Name    string
	PID     int
	Running bool
	Log     string
}

// Status checks the cluster's processes and asks kube-apiserver for the
// node, each question bounded by a few seconds.
func (c *Cluster) Status(ctx context.Context) Status {
	s := Status{StateDir: c.p.dir, Node: c.st.Name, NodeIP: c.st.NodeIP, Containerd: c.st.ContainerdVersion}
	if c.st.Holder != nil {
		s.Processes = append(s.Processes, processStatus(c.st.Holder))
	}
	for _, p := range c.st.Processes {
		s.Processes = append(s.Processes, processStatus(p))
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if s.APIServerReady = c.apiserverReady(ctx); s.APIServerReady == nil {
		s.NodeReady = c.nodeReady(time.Time{})(ctx)
	}
	for _, w := range c.workers {
		s.Workers = append(s.Workers, w.Status(ctx))
	}
	return s
}

func processStatus(p *process) ProcessStatus {
	return ProcessStatus{Name: p.Name, PID: p.PID, Running: p.running(), Log: p.Log}
}

// Print writes the status for people.
func (s Status) Print(w io.Writer) {
	fmt.Fprintf(w, "cluster in %s: node %s, node IP %s, containerd %s\n", s.StateDir, s.Node, s.NodeIP, cmp.Or(s.Containerd, "unknown"))
	for _, p := range s.Processes {
		state := "running"
		if !p.Running {
			state = "NOT RUNNING"
		}
		fmt.Fprintf(w, "  %-24s pid %-8d %-12s log %s\n", p.Name, p.PID, state, p.Log)
	}
	fmt.Fprintf(w, "  kube-apiserver ready: %s\n", okOr(s.APIServerReady))
	fmt.Fprintf(w, "  node Ready:           %s\n", okOr(s.NodeReady))
	for _, ws := range s.Workers {
		ws.Print(w)
	}
}

func okOr(err error) string {
	if err == nil {
		return "yes"
	}
	return "no: " + err.Error()
}

// StopKubelet stops the node's kubelet by PID, as when a node is shut
// down: its pods' containers keep running until Down.
func (c *Cluster) StopKubelet(ctx context.Context) error {
	p := c.st.process(kubelet)
	if p == nil {
		return fmt.Errorf("stop kubelet: the cluster in %s has none", c.p.dir)
	}
	return c.step(c.st.Name+": kubelet stopped", func() error {
		return stopProcesses(ctx, []*process{p}, stopGrace)
	})
}

// RestartKubelet stops kubelet by PID, starts it again with the same
// arguments and waits until it serves and the node is Ready again.
func (c *Cluster) RestartKubelet(ctx context.Context) error {
	old := c.st.process(kubelet)
	if old == nil {
		return fmt.Errorf("restart kubelet: the cluster in %s has none", c.p.dir)
	}
	return c.step("kubelet restarted, node Ready", func() error {
		if err := stopProcesses(ctx, []*process{old}, stopGrace); err != nil {
			return err
		}
		since := time.Now()
		p, err := c.startDaemon(kubelet, old.Argv)
		if err != nil {
			return err
		}
		err = waitFor(ctx, "kubelet's healthz", p, daemonTimeout, func(ctx context.Context) error {
			return c.httpGet(ctx, "http://"+kubeletHealthz+"/healthz")
		})
		if err != nil {
			return err
		}
		return waitFor(ctx, "node "+c.st.Name+" to be Ready", p, nodeReadyTimeout, c.nodeReady(since))
	})
}
