package peers

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

var (
	scaleNodes   = flag.String("scale-nodes", "10,25,50", "BenchmarkScale: node counts, one burst each")
	scalePods    = flag.Int("scale-pods", 8, "BenchmarkScale: pods per node (Multus #1344: 2400 pods on 300 nodes)")
	scaleNets    = flag.Int("scale-nets", 5, "BenchmarkScale: InfiniBand VF attachments per pod, besides the default network")
	scaleVirtual = flag.Int("scale-virtual", 2, "BenchmarkScale: of the nodes, how many are virtual nodes with ConnectX-6 InfiniBand VFs")
)

// podReadySLO is Kubernetes' pod startup SLO: 99% of stateless pods
// running within 5 s of their creation, image pulls excluded.
const podReadySLO = 5 * time.Second

// ibDelegate is every InfiniBand network's plugin: the test plugin
// answering as ib-sriov-cni does, at once, so that what is measured is
// hwnet and the API server.
const ibDelegate = `"type": "hwnet-test-plugin", "personality": "ib-sriov", "deviceID": "0000:3b:01.0"`

// ibPools is the virtual nodes' pool: every ConnectX-6 VF.
const ibPools = `{"resourceList": [{"resourceName": "ib_vfs", "resourcePrefix": "nvidia.com",
  "selectors": {"vendors": ["15b3"], "devices": ["101c"], "drivers": ["mlx5_core"]}}]}`

// scaleNode is one node of the simulated cluster: its agent and the
// container runtime's CNI side.
type scaleNode struct {
	name  string
	vn    *virtualnode.Node // nil: no hardware
	agent *cniTool
	rt    *cniRuntime
	mu    sync.Mutex
	pods  []benchPod // created
}

// BenchmarkScale reproduces the shape of Multus issue #1344 (pods with
// several InfiniBand VFs each, all created at once across many nodes)
// against one real kube-apiserver: every node runs its own hwnet-agent
// process, a few on virtual nodes with InfiniBand VFs, the rest on nodes
// without hardware; a kubelet stand-in per pod runs the pod's CNI ADD
// through the hwnet shim as soon as the pod exists. It prints pod-ready
// (ADD complete) p50/p99 against the 5 s SLO and the API requests per
// pod and per node. Use -benchtime 1x; as root.
func BenchmarkScale(b *testing.B) {
	vnodetest.RequireRoot(b)
	for b.Loop() {
		bins := hwnetBinaries(b)
		env := newCNIEnv(b, bins)
		nets := make([]string, *scaleNets)
		for i := range nets {
			nets[i] = fmt.Sprintf("ib-%d", i+1)
			env.createNAD(b, nets[i], ibDelegate)
		}
		t := &table{tools: []string{"hwnet"}}
		counts := nodeCounts(b)
		raiseInotifyInstances(b, 8*slices.Max(counts)+256)
		for _, n := range counts {
			env.scaleRun(b, t, bins, n, nets)
		}
		t.note("Scale: per size, %d pods per node with %d InfiniBand networks each (NetworkAttachmentDefinitions; the delegate is hwnet-test-plugin answering as ib-sriov-cni, at once) plus the default network, all created at once; each pod's ADD runs through the hwnet shim (libcni, as containerd) as soon as its Create returns, the pods of a node concurrently as kubelet starts them. Each node is its own hwnet-agent process with its own API client; %d of them on virtual nodes with ConnectX-6 InfiniBand VFs, the rest on an empty sysfs. One kube-apiserver + etcd (test/kubeapi) for all, on the same 2 CPUs as every agent, shim and delegate. Pod-ready = Create returned to ADD returned; the Kubernetes SLO is p99 <= %v.",
			*scalePods, *scaleNets, *scaleVirtual, podReadySLO)
		t.note("machine: %d CPUs, %s, kernel %s; load average (1 min) %.2f at the end; %s",
			runtime.NumCPU(), cpuModel(), kernel(), loadavg(), time.Now().UTC().Format(time.RFC3339))
		fmt.Println()
		t.print(os.Stdout)
	}
}

func nodeCounts(tb testing.TB) []int {
	var counts []int
	for _, f := range strings.Split(*scaleNodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			tb.Fatalf("-scale-nodes: %q is not a node count", f)
		}
		counts = append(counts, n)
	}
	return counts
}

// scaleRun starts n nodes, creates their pods at once and ADDs them,
// records the figures, then DELs the pods and stops the nodes.
func (e *cniEnv) scaleRun(b *testing.B, t *table, bins string, n int, nets []string) {
	size := fmt.Sprintf(", %d nodes x %d pods", n, *scalePods)
	apiPID := e.apiserverPID(b)
	life0 := e.requestsServed(b) - e.ownRequests()
	nodes := e.startFleet(b, bins, n)

	api0 := cpuOf(apiPID)
	start := time.Now()
	ready, failed := e.burstAll(b, nodes, nets)
	all := time.Since(start)
	pods := float64(n * *scalePods)
	t.add("pod-ready p50 (Create to ADD done)"+size, "ms", "hwnet", ready.pct(50))
	t.add("pod-ready p99 (Create to ADD done)"+size, "ms", "hwnet", ready.pct(99))
	t.add("pods past the 5 s SLO"+size, "%", "hwnet", 100*float64(ready.over(ms(podReadySLO)))/pods)
	t.add("all pods ready"+size, "s", "hwnet", all.Seconds())
	t.add("failed ADDs"+size, "count", "hwnet", float64(failed))
	t.add("kube-apiserver CPU per pod (ADD, the pod's Create included)"+size, "ms", "hwnet", ms(cpuOf(apiPID)-api0)/pods)
	var agentRSS samples
	for _, node := range nodes {
		rss, _ := node.agent.daemon.rssMB()
		agentRSS = append(agentRSS, rss)
	}
	t.add("agent RSS after the burst, median over nodes"+size, "MiB", "hwnet", agentRSS.median())
	e.teardownFleet(b, nodes)
	// The API server counts a watch when it ends: the agents' informers
	// list and watch through one, so their start shows once they stop.
	life := e.requestsServed(b) - e.ownRequests() - life0
	t.add("API requests per node over its agent's life (start, ADDs, DELs, stop)"+size, "requests", "hwnet", life/float64(n))
	t.add("API requests per pod, the agents' start and watches included"+size, "requests", "hwnet", life/float64(n**scalePods))
}

// startFleet starts n agents, the first -scale-virtual on virtual nodes.
func (e *cniEnv) startFleet(b *testing.B, bins string, n int) []*scaleNode {
	nodes := make([]*scaleNode, n)
	for i := range nodes {
		name := fmt.Sprintf("s%d-%03d", n, i)
		setup := agentSetup{name: name, nodeName: name, dir: filepath.Join(e.dir, "scale", name), pools: ibPools}
		var vn *virtualnode.Node
		if i < *scaleVirtual {
			vn = ibNode(b, name, *scalePods**scaleNets)
		}
		agent := e.startAgent(b, vn, bins, setup)
		rt, err := newRuntime(agent.confDir, e.binDir, filepath.Join(setup.dir, "runtime-cache"), e.netns)
		if err != nil {
			b.Fatal(err)
		}
		nodes[i] = &scaleNode{name: name, vn: vn, agent: agent, rt: rt}
	}
	return nodes
}

// ibNode builds a virtual node with one ConnectX-6 in InfiniBand mode and
// vfs VFs.
func ibNode(tb testing.TB, name string, vfs int) *virtualnode.Node {
	spec := &virtualnode.Spec{Name: name, PFs: []virtualnode.PFSpec{{Model: "ConnectX-6", VFs: vfs, LinkType: "infiniband"}}}
	return vnodetest.BuildForTest(tb, spec, vnodetest.OpenDB(tb), true)
}

// burstAll creates every node's pods at once, each pod's ADD following
// its Create, and returns the pod-ready times and the failures.
func (e *cniEnv) burstAll(b *testing.B, nodes []*scaleNode, nets []string) (samples, int) {
	ctx := context.Background()
	var mu sync.Mutex
	var ready samples
	failed := 0
	var wg sync.WaitGroup
	for _, node := range nodes {
		for j := range *scalePods {
			wg.Go(func() {
				pod, err := e.createPod(ctx, fmt.Sprintf("%s-%d", node.name, j), node.name, nets)
				created := time.Now()
				if err == nil {
					node.mu.Lock()
					node.pods = append(node.pods, pod)
					node.mu.Unlock()
					_, err = node.rt.addConcurrent(ctx, pod)
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					b.Logf("%s: %v", node.name, err)
					return
				}
				ready = append(ready, ms(time.Since(created)))
			})
		}
	}
	wg.Wait()
	return ready, failed
}

// teardownFleet DELs every node's pods, deletes them and stops the
// agents.
func (e *cniEnv) teardownFleet(b *testing.B, nodes []*scaleNode) {
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Go(func() {
			for _, pod := range node.pods {
				if _, err := node.rt.delConcurrent(context.Background(), pod); err != nil {
					b.Errorf("%s: DEL %s: %v", node.name, pod.name, err)
				}
			}
		})
	}
	wg.Wait()
	for _, node := range nodes {
		e.deletePods(b, node.pods)
		node.agent.daemon.stop()
		if node.vn != nil {
			if err := node.vn.Destroy(); err != nil {
				b.Error(err)
			}
		}
	}
}

// raiseInotifyInstances makes room for n inotify instances of root's: an
// agent uses about five (device plugin directory, CNI configuration, pools
// file...), and a real node runs one agent, this machine a hundred. The
// limit is only ever raised.
func raiseInotifyInstances(tb testing.TB, n int) {
	const knob = "/proc/sys/fs/inotify/max_user_instances"
	cur, err := os.ReadFile(knob)
	if err != nil {
		tb.Fatal(err)
	}
	if v, _ := strconv.Atoi(strings.TrimSpace(string(cur))); v >= n {
		return
	}
	if err := os.WriteFile(knob, []byte(strconv.Itoa(n)), 0o644); err != nil {
		tb.Fatalf("raise %s to %d: %v", knob, n, err)
	}
}

// apiserverPID finds the kube-apiserver serving from the server's
// directory.
func (e *cniEnv) apiserverPID(tb testing.TB) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmd), "kube-apiserver") || !strings.Contains(string(cmd), e.api.Dir()) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return pid
	}
	tb.Fatal("no kube-apiserver process found")
	return 0
}
