package cluster

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/e2e"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

var (
	rounds    = flag.Int("rounds", 1, "interleaved rounds of every stack (each about 13 min here)")
	podCounts = flag.String("pods", "1,20,100", "pods created at once, per batch")
	stackList = flag.String("stacks", "hwnet,hwnet-dra,peer", "stacks to measure, in each round's order")
	stateDir  = flag.String("state-dir", "/tmp/hwnet-bench-cluster", "the bench cluster's state directory (removed at the end)")
	sriovdp   = flag.String("sriovdp", "", "the SR-IOV network device plugin binary (default $SRIOVDP_BIN, else ../shared/peers/sriovdp beside the checkout, else /work/shared/peers/sriovdp)")
	multusDir = flag.String("multus", "/var/cache/hwnet-ci/peers/multus-v4.3.0", "directory with Multus v4.3.0's multus-daemon, multus-shim, install_multus and passthru (test/bench/peers.sh builds them)")
	keep      = flag.Bool("keep", false, "leave the cluster running at the end")
	nodeCount = flag.Int("nodes", 1, "nodes in the cluster: 1 runs the pods on the control plane; N > 1 gives N-1 workers the bench's SR-IOV hardware, leaves the control plane without any and spreads every batch evenly over the workers")
)

const (
	setupTimeout = 10 * time.Minute
	// maxNodes keeps a run to what this machine's kind can hold: each
	// worker has 612 VFs, its own kubelet and containerd.
	maxNodes = 5
	// sriovNodeLabel marks the nodes the pods run on.
	sriovNodeLabel = "bench.hwnet.io/sriov"
)

// bench is the cluster and what every stack shares.
type bench struct {
	c *cluster.Cluster
	// sriov are the nodes with the bench's SR-IOV hardware, where the
	// pods run: the control plane alone, or every worker.
	sriov []*cluster.Cluster
	repo  string
	tab   *table
	// columns are the stacks measured, in order: the table's columns.
	columns []string
}

// BenchmarkCluster brings up the bench's cluster, runs every stack's
// batches in interleaved rounds and prints the table. Run it once
// (-benchtime 1x).
func BenchmarkCluster(b *testing.B) {
	vnodetest.RequireRoot(b)
	for b.Loop() {
		counts, err := parseCounts(*podCounts, max(1, *nodeCount-1))
		if err != nil {
			b.Fatal(err)
		}
		be := up(b)
		stacks, err := be.stacks(strings.Split(*stackList, ","))
		if err != nil {
			b.Fatal(err)
		}
		be.columns = stackNames(stacks)
		start := time.Now()
		for r := 0; r < *rounds; r++ {
			for _, s := range stacks {
				be.round(b, s, counts, r)
			}
		}
		be.tab.note("%d rounds of %s in %.0f s; machine: %s", *rounds, *stackList, time.Since(start).Seconds(), machine())
		be.tab.print(os.Stdout, be.columns, counts)
	}
}

// up brings the bench's cluster up with every image, deploys hwnet once
// (for its CRDs, DeviceClasses and admission policies), installs
// hwnet-test-plugin and applies the NADs.
func up(b *testing.B) *bench {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	repo, err := e2e.RepoRoot()
	if err != nil {
		b.Fatal(err)
	}
	images, err := image.Images(ctx, repo, cluster.TestImageDir())
	if err != nil {
		b.Fatal(err)
	}
	// The peer image and the test plugin are built afresh each run.
	b.Cleanup(func() { os.RemoveAll(*stateDir + "-images") })
	if strings.Contains(*stackList, "peer") {
		peers, err := peerImageFile(*stateDir+"-images", sriovdpBinary(repo), *multusDir)
		if err != nil {
			b.Fatal(err)
		}
		images = append(images, peers)
	}
	cp, workers, err := nodeSpecs(*nodeCount)
	if err != nil {
		b.Fatal(err)
	}
	c, err := cluster.Up(ctx, cluster.Config{StateDir: *stateDir, Spec: cp, Workers: workers, Repo: repo,
		Images: images, SandboxImage: image.Pause, Progress: os.Stdout})
	if c != nil && !*keep {
		b.Cleanup(func() { down(b, c) })
	}
	if err != nil {
		b.Fatal(err)
	}
	// The pods run on the workers, or on the control plane when alone.
	be := &bench{c: c, sriov: c.Nodes()[min(1, len(workers)):], repo: repo, tab: newTable()}
	if err := be.labelSRIOVNodes(ctx); err != nil {
		b.Fatal(err)
	}
	if err := be.prepare(ctx); err != nil {
		b.Fatal(err)
	}
	return be
}

func down(b *testing.B, c *cluster.Cluster) {
	start := time.Now()
	if err := c.Down(context.Background()); err != nil {
		b.Errorf("cluster down: %v", err)
	}
	fmt.Printf("bench: cluster down in %.1f s\n", time.Since(start).Seconds())
}

// prepare deploys hwnet for what every stack shares (the NAD CRD, the
// DeviceClasses), then the NADs and hwnet-test-plugin (ib-net's
// delegate), and removes the agent again.
func (be *bench) prepare(ctx context.Context) error {
	if _, err := e2e.DeployHwnet(ctx, be.c, be.repo, os.Stdout); err != nil {
		return err
	}
	if err := e2e.ApplyNADs(ctx, be.c, filepath.Join(be.repo, e2e.NADsFile)); err != nil {
		return err
	}
	plugin, err := buildTestPlugin(ctx, be.repo, *stateDir+"-images")
	if err != nil {
		return err
	}
	if err := e2e.InstallCNIPlugin(ctx, be.c, plugin); err != nil {
		return err
	}
	return removeHwnet(ctx, be)
}

// nodeSpec is testdata/node.yaml.
func nodeSpec() (*virtualnode.Spec, error) {
	data, err := os.ReadFile("testdata/node.yaml")
	if err != nil {
		return nil, err
	}
	return virtualnode.ParseSpec(data)
}

// nodeSpecs are the cluster's nodes for -nodes n: testdata/node.yaml
// alone, or a control plane without SR-IOV hardware (named as the file
// says) and n-1 workers with the file's hardware, named as
// cluster.WorkerSpecs names them.
func nodeSpecs(n int) (cp *virtualnode.Spec, workers []*virtualnode.Spec, err error) {
	if n < 1 || n > maxNodes {
		return nil, nil, fmt.Errorf("-nodes %d: from 1 to %d", n, maxNodes)
	}
	spec, err := nodeSpec()
	if err != nil || n == 1 {
		return spec, nil, err
	}
	for _, w := range cluster.WorkerSpecs(spec.Name, n) {
		hw, err := nodeSpec()
		if err != nil {
			return nil, nil, err
		}
		hw.Name = w.Name
		workers = append(workers, hw)
	}
	return &virtualnode.Spec{Name: spec.Name}, workers, nil
}

// labelSRIOVNodes labels the nodes the pods run on, whose label the pods'
// affinity and spread constraint select, when there are workers.
func (be *bench) labelSRIOVNodes(ctx context.Context) error {
	if len(be.c.Nodes()) == 1 {
		return nil
	}
	client, err := e2e.Client(be.c)
	if err != nil {
		return err
	}
	patch := []byte(`{"metadata":{"labels":{"` + sriovNodeLabel + `":"true"}}}`)
	for _, n := range be.sriov {
		if _, err := client.CoreV1().Nodes().Patch(ctx, n.NodeName(), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("label node %s: %w", n.NodeName(), err)
		}
	}
	return nil
}

// parseCounts are -pods' batch sizes, each at most what nodes SR-IOV
// nodes hold.
func parseCounts(s string, nodes int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxPods*nodes {
			return nil, fmt.Errorf("-pods %q: %q is not a count from 1 to %d", s, f, maxPods*nodes)
		}
		out = append(out, n)
	}
	return out, nil
}

// sriovdpBinary is -sriovdp, else $SRIOVDP_BIN, else the shared copy.
func sriovdpBinary(repo string) string {
	for _, p := range []string{*sriovdp, os.Getenv("SRIOVDP_BIN"), filepath.Join(repo, "..", "shared", "peers", "sriovdp")} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "/work/shared/peers/sriovdp"
}
