package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// Cluster is a running cluster, or one node of it: the control plane's
// Cluster is the cluster's, and Nodes gives each node's, whose Command,
// Node, SyncDevices and RestartKubelet are that node's. Command,
// RESTConfig, Status and ImportImage may be called from several goroutines
// at once; Down, RestartKubelet, SyncDevices and SetProgress must run
// alone, and only one process at a time may change a cluster.
type Cluster struct {
	p        paths
	st       *state
	workers  []*Cluster // the control plane's, in index order
	node     *virtualnode.Node
	nodeErr  error // why node is nil
	progress io.Writer
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu        sync.Mutex
	clientset kubernetes.Interface
}

// Open attaches to the cluster whose state directory is stateDir, as Up
// in this or another process left it. It fails only when there is no
// readable state: a cluster whose virtual node is lost opens with a nil
// Node, so that Down can remove what is left.
func Open(stateDir string) (*Cluster, error) {
	dir, err := absDir(stateDir)
	if err != nil {
		return nil, err
	}
	p := paths{dir: dir}
	st, err := readState(p.state())
	if err != nil {
		return nil, err
	}
	c := newCluster(p, st, io.Discard)
	c.node, c.nodeErr = virtualnode.Open(p.node())
	for _, name := range st.Workers {
		w, err := Open(p.worker(name).dir)
		if isNotExist(err) {
			continue // Up failed before the worker's state was saved
		}
		if err != nil {
			return nil, fmt.Errorf("worker %s: %w", name, err)
		}
		c.workers = append(c.workers, w)
	}
	return c, nil
}

func newCluster(p paths, st *state, progress io.Writer) *Cluster {
	return &Cluster{p: p, st: st, progress: progress, dial: netnsDialer(netnsPath(st.Netns))}
}

func absDir(dir string) (string, error) {
	if dir == "" {
		dir = DefaultStateDir
	}
	return filepath.Abs(dir)
}

// SetProgress makes the cluster's later steps (Down, RestartKubelet,
// imports) print their progress lines to w.
func (c *Cluster) SetProgress(w io.Writer) {
	c.progress = w
	for _, n := range c.workers {
		n.progress = w
	}
}

// Nodes are the cluster's nodes, the control plane first: one for a
// one-node cluster.
func (c *Cluster) Nodes() []*Cluster { return append([]*Cluster{c}, c.workers...) }

// StateDir is the cluster's state directory.
func (c *Cluster) StateDir() string { return c.p.dir }

// Node is the virtual SR-IOV node the cluster runs on; nil when its state
// was lost (see Open).
func (c *Cluster) Node() *virtualnode.Node { return c.node }

// NodeName is the Kubernetes node's name, also the virtual node's.
func (c *Cluster) NodeName() string { return c.st.Name }

// Index is the node's place in its cluster: 0 for the control plane's,
// from 1 for the workers'.
func (c *Cluster) Index() int { return c.st.Index }

// NodeIP is the node's InternalIP, inside the cluster's network namespace.
func (c *Cluster) NodeIP() string { return c.st.NodeIP }

// Kubeconfig is the admin's kubeconfig. Its server address is reachable
// inside the cluster's namespaces only: use it with Command (which sets
// KUBECONFIG to it), or RESTConfig from outside.
func (c *Cluster) Kubeconfig() string { return c.p.kubeconfig("admin") }

// LogDir holds one log per process of the cluster.
func (c *Cluster) LogDir() string { return c.p.logs() }

// RESTConfig returns an admin client configuration usable from any process
// on the host: it dials kube-apiserver from inside the cluster's network
// namespace.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("admin kubeconfig: %w", err)
	}
	cfg.Dial = c.dial
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

// client returns an admin clientset, made on first use.
func (c *Cluster) client() (kubernetes.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clientset != nil {
		return c.clientset, nil
	}
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	if c.clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c.clientset, nil
}

// Command returns a command that runs name inside the cluster's mount and
// network namespaces, with KUBECONFIG set to the admin's kubeconfig and
// the Kubernetes binaries first in PATH.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "nsenter", c.nsenterArgv(append([]string{name}, args...))[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig(),
		"PATH="+c.st.KubeBinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd
}

// nsenterArgv wraps argv to run inside the holder's namespaces; without a
// holder (Up failed before it), nsenter fails on PID 0.
func (c *Cluster) nsenterArgv(argv []string) []string {
	pid := 0
	if c.st.Holder != nil {
		pid = c.st.Holder.PID
	}
	return append([]string{"nsenter", "-t", strconv.Itoa(pid), "-m", "-n", "--"}, argv...)
}

// SyncDevices brings the character devices under the cluster's /dev/vfio
// and /dev/infiniband in line with the virtual node's device files, after
// Node().BindDriver or SetNumVFs changed them. (UIO devices, which live at
// the top of /dev, show as they were at Up.)
func (c *Cluster) SyncDevices() error {
	if c.node == nil {
		return fmt.Errorf("sync devices: %w", c.nodeErr)
	}
	return c.node.MirrorDevices(c.p.dev())
}

// startDaemon starts argv inside the namespaces as the named component,
// moves it into the cluster's cgroup and records it.
func (c *Cluster) startDaemon(name string, argv []string) (*process, error) {
	p, err := startDetached(name, c.nsenterArgv(argv), c.p.log(name))
	if err != nil {
		return nil, err
	}
	p.Argv = argv
	c.st.setProcess(p)
	return p, errors.Join(joinCgroups(c.st.CgroupRoot, p.PID), c.saveState())
}

func (c *Cluster) saveState() error { return c.st.write(c.p.state()) }

// say prints a progress line.
func (c *Cluster) say(format string, args ...any) {
	fmt.Fprintf(c.progress, "cluster: "+format+"\n", args...)
}

// step runs fn and prints what it did with its duration.
func (c *Cluster) step(what string, fn func() error) error {
	return stepFunc(c.progress, what, fn)
}

// isNotExist reports a missing state file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
