package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// The suite's cluster: its node is named $HWNET_E2E_NAME, else
// defaultNodeName, a name of its own so that the suite and `make demo`'s
// cluster (node hwnet-e2e) can run at once; two checkouts testing at once
// set names of their own. Its state directory is $HWNET_E2E_STATE, else
// the node's name under os.TempDir(); HWNET_E2E_KEEP=1 leaves it running
// after the tests (a later run reuses it).
const (
	stateEnv        = "HWNET_E2E_STATE"
	keepEnv         = "HWNET_E2E_KEEP"
	nameEnv         = "HWNET_E2E_NAME"
	defaultNodeName = "hwnet-e2e-suite"
	setupTimeout    = 10 * time.Minute
)

// env is what every test gets: the shared cluster with hwnet deployed and
// the NADs of NADsFile applied.
type env struct {
	c      *cluster.Cluster
	client kubernetes.Interface
	pools  Pools
	// podres is kubelet's PodResources API, asked directly rather than
	// through hwnet's own client.
	podres     podresv1.PodResourcesListerClient
	podresConn *grpc.ClientConn
	repo       string
	started    time.Time
}

// shared brings the cluster up for the first test that needs it; TestMain
// tears it down after the last.
type shared struct {
	once sync.Once
	env  *env
	err  error
}

// suite is the package's one-node cluster and multi its cluster of
// multiNodes nodes (TestMultiNode_*), brought up by the first test that
// needs each, as TestMain and sync.Once share expensive fixtures between
// tests.
var suite, multi shared

// multiNodes makes the multi-node cluster: a control plane and a worker
// with SR-IOV hardware, and a worker with none (cluster.WorkerSpecs).
const multiNodes = 3

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	for _, s := range []*shared{&multi, &suite} {
		if err := s.tearDown(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// setup returns the shared environment, bringing it up on first use. It
// skips with -short and without root.
func setup(t *testing.T) *env { return suite.get(t, 1) }

// setupMulti returns the multi-node environment, bringing it up on first
// use; its c is the control plane's Cluster, whose Nodes are the nodes.
func setupMulti(t *testing.T) *env { return multi.get(t, multiNodes) }

func (s *shared) get(t *testing.T, nodes int) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e: brings up a Kubernetes cluster; skipped with -short")
	}
	vnodetest.RequireRoot(t)
	s.once.Do(func() {
		s.env = &env{}
		s.err = s.env.bringUp(t, nodes)
	})
	if s.err != nil {
		t.Fatalf("e2e cluster of %d nodes: %v", nodes, s.err)
	}
	return s.env
}

// bringUp brings a cluster of nodes up (or reuses the one in its state
// directory), deploys hwnet and applies the NADs. The test's log gets the
// progress lines.
func (e *env) bringUp(t *testing.T, nodes int) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	e.started = time.Now()
	var err error
	if e.repo, err = RepoRoot(); err != nil {
		return err
	}
	images, err := image.Images(ctx, e.repo, cluster.TestImageDir())
	if err != nil {
		return err
	}
	spec := virtualnode.DefaultSpec()
	// A PF whose firmware has SR-IOV off, as hwnetctl doctor should name,
	// one with scalable functions, and an mlx4 InfiniBand one whose VFs'
	// partition keys hwnet maps (in no pool of deploy/pools.yaml); after
	// the default node's PFs, so their addresses stay.
	spec.PFs = append(spec.PFs, virtualnode.PFSpec{Model: "E810-C", SRIOVOff: true, Names: []string{firmwareOffPF}},
		virtualnode.PFSpec{Model: "ConnectX-6 Dx", SFs: 2, Names: []string{sfPF}},
		virtualnode.PFSpec{Model: "ConnectX-3", LinkType: "infiniband", VFs: 2, Names: []string{pkeyPF}})
	dir := stateDir()
	spec.Name = nodeName()
	if nodes > 1 {
		// Names and a state directory of its own: both clusters may run.
		spec.Name, dir = spec.Name+"-m", dir+"-m"
	}
	progress := testWriter{t}
	// A half-up cluster is kept too, for TestMain's tearDown to remove.
	e.c, err = cluster.Up(ctx, cluster.Config{StateDir: dir, Spec: spec, Workers: cluster.WorkerSpecs(spec.Name, nodes),
		Repo: e.repo, Images: images, SandboxImage: image.Pause, Progress: progress})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, logDir(e.c))
	}
	// Later steps (RestartKubelet, Down) outlive this test's log.
	e.c.SetProgress(os.Stdout)
	if e.client, err = Client(e.c); err != nil {
		return err
	}
	if e.pools, err = DeployHwnet(ctx, e.c, e.repo, progress); err != nil {
		return err
	}
	if err := ApplyNADs(ctx, e.c, filepath.Join(e.repo, NADsFile)); err != nil {
		return err
	}
	if err := e.removeLeftoverPods(ctx, progress); err != nil {
		return err
	}
	// The cluster's /var/lib is StateDir/var-lib (see package cluster).
	sock := filepath.Join(e.c.StateDir(), "var-lib", "kubelet", "pod-resources", "kubelet.sock")
	e.podresConn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	e.podres = podresv1.NewPodResourcesListerClient(e.podresConn)
	t.Logf("e2e: cluster up and hwnet deployed in %.1fs", time.Since(e.started).Seconds())
	return nil
}

// removeLeftoverPods deletes the pods a run killed before its cleanups
// (a package timeout) left in a cluster this run reuses: each still holds
// its devices, which every later test would find taken.
func (e *env) removeLeftoverPods(ctx context.Context, progress io.Writer) error {
	list, err := e.client.CoreV1().Pods(podNamespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		return err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Name)
	}
	start := time.Now()
	if err := e.deletePods(ctx, names...); err != nil {
		return fmt.Errorf("pods an earlier run left: %w", err)
	}
	fmt.Fprintf(progress, "e2e: deleted the pods an earlier run left: %s (%.1fs)\n", strings.Join(names, ", "), time.Since(start).Seconds())
	return nil
}

func (s *shared) tearDown() error {
	if s.env == nil || s.env.c == nil {
		return nil
	}
	if s.env.podresConn != nil {
		s.env.podresConn.Close()
	}
	if os.Getenv(keepEnv) == "1" {
		fmt.Printf("e2e: %s=1: the cluster keeps running in %s (remove it with `hwnet-cluster --state-dir %[2]s down`)\n",
			keepEnv, s.env.c.StateDir())
		return nil
	}
	start := time.Now()
	err := s.env.c.Down(context.Background())
	fmt.Printf("e2e: cluster down in %.1fs; the suite took %.1fs\n", time.Since(start).Seconds(), time.Since(s.env.started).Seconds())
	s.env, s.err = nil, errors.New("the cluster was torn down by an earlier test")
	return err
}

func stateDir() string {
	if dir := os.Getenv(stateEnv); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), nodeName())
}

func nodeName() string {
	if name := os.Getenv(nameEnv); name != "" {
		return name
	}
	return defaultNodeName
}

func logDir(c *cluster.Cluster) string {
	if c == nil {
		return "no cluster"
	}
	return c.LogDir()
}

// testWriter sends progress lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
