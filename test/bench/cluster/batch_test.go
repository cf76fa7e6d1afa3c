package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/test/e2e"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
)

const (
	podNS = "default"
	// maxPods is what testdata/node.yaml's IB VFs (100) allow at once.
	maxPods      = 100
	batchLabel   = "hwnet-bench-batch"
	statusAnnot  = "k8s.v1.cni.cncf.io/network-status"
	networks     = 4 // the CNF pod's attachments; network-status has one more
	batchTimeout = 90 * time.Second
	perPodWait   = 2500 * time.Millisecond
)

// podTimes is what the watch saw of one pod, each time since its Create
// was sent; zero when never seen.
type podTimes struct {
	sent                                      time.Time
	admitted, scheduled, sandbox, run, status time.Duration
	// node is where the scheduler put the pod.
	node string
}

// done: Running with a complete network-status.
func (p *podTimes) done() bool { return p.run > 0 && p.status > 0 }

// batchResult is one batch of one stack.
type batchResult struct {
	pods      []*podTimes
	failures  int
	retries   int     // FailedCreatePodSandBox events
	nodeCPU   float64 // CPU s of the whole cluster's cgroup, per pod
	daemonCPU float64 // CPU s of the stack's daemons, per pod
	requests  float64 // API requests per pod, the bench's own excluded
	sandbox   sandboxTimes
}

// round deploys a stack, runs one batch of every count, records the
// daemons' peak RSS, removes the stack and what it left on the nodes. A
// stack that fails is noted in the table and removed, and the run goes
// on with the others.
func (be *bench) round(b *testing.B, s stack, counts []int, r int) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	if err := be.measure(ctx, s, counts, r); err != nil {
		be.tab.note("round %d: %s: %v (logs in %s)", r, s.name, err, be.c.LogDir())
		fmt.Printf("bench: round %d: %s: %v\n", r, s.name, err)
		if errors.Is(err, errNodeNotReady) {
			// No stack can come down, nor a later one run, on a dead node.
			be.tab.print(os.Stdout, be.columns, counts)
			b.Fatalf("round %d: %s: %v (logs in %s)", r, s.name, err, be.c.LogDir())
		}
	}
	if err := s.down(ctx, be); err != nil {
		b.Fatalf("round %d: %s down: %v", r, s.name, err)
	}
	if err := be.restoreNodes(ctx, s.name, r); err != nil {
		b.Fatalf("round %d: %v", r, err)
	}
}

func (be *bench) measure(ctx context.Context, s stack, counts []int, r int) error {
	start := time.Now()
	if err := s.up(ctx, be); err != nil {
		return fmt.Errorf("up: %w", err)
	}
	fmt.Printf("bench: round %d: %s up in %.1f s (load %.1f)\n", r, s.name, time.Since(start).Seconds(), loadavg())
	for _, n := range counts {
		res, err := be.batch(ctx, s, n, fmt.Sprintf("r%d-%s-%d", r, s.name, n))
		if err != nil {
			return fmt.Errorf("%d pods: %w", n, err)
		}
		be.tab.addBatch(s.name, n, res)
		fmt.Printf("bench: round %d: %s, %d pods: Running p50 %.2f s max %.2f s, %d failures, %d sandbox retries, pods per node %s (load %.1f)\n",
			r, s.name, n, pct(runTimes(res.pods), 50), pct(runTimes(res.pods), 100), res.failures, res.retries, podsPerNode(res.pods), loadavg())
		if res.failures == n {
			return fmt.Errorf("%d pods: none Running with its network-status; larger batches skipped", n)
		}
	}
	be.tab.addRSS(s.name, be.daemonPeakRSS(s.daemons))
	return nil
}

// batch creates n CNF pods at once, watches them to Running with their
// network-status, measures, and deletes them.
func (be *bench) batch(ctx context.Context, s stack, n int, id string) (*batchResult, error) {
	client, err := e2e.Client(be.c)
	if err != nil {
		return nil, err
	}
	for _, node := range be.sriov {
		if err := waitNodeReady(ctx, client, node.NodeName(), stackWait); err != nil {
			return nil, err
		}
	}
	before, err := snapshot(ctx, client, be.c, s.daemons)
	if err != nil {
		return nil, err
	}
	times := make([]*podTimes, n)
	byName := map[string]*podTimes{}
	for i := range times {
		times[i] = &podTimes{}
		byName[podName(id, i)] = times[i]
	}
	var mu sync.Mutex
	wctx, cancel := context.WithTimeout(ctx, batchTimeout+time.Duration(n)*perPodWait)
	defer cancel()
	watched := make(chan struct{})
	opts := metav1.ListOptions{LabelSelector: batchLabel + "=" + id}
	var watches atomic.Int64
	open := func(ctx context.Context) (watch.Interface, error) {
		watches.Add(1)
		return client.CoreV1().Pods(podNS).Watch(ctx, opts)
	}
	// A node gone NotReady ends the batch at once, with why.
	wctx, give := context.WithCancelCause(wctx)
	defer give(nil)
	for _, node := range be.sriov {
		go func() {
			if err := nodeNotReady(wctx, client, node.NodeName()); err != nil {
				give(err)
			}
		}()
	}
	go func() { defer close(watched); follow(wctx, open, byName, &mu) }()
	createAll(ctx, client, id, times, len(be.sriov) > 1, &mu)
	<-watched
	if err := context.Cause(wctx); errors.Is(err, errNodeNotReady) {
		return nil, err
	}
	after, err := snapshot(ctx, client, be.c, s.daemons)
	if err != nil {
		return nil, err
	}
	res := &batchResult{pods: times}
	for _, p := range times {
		if !p.done() {
			res.failures++
		}
	}
	res.nodeCPU = (after.nodeCPU - before.nodeCPU) / float64(n)
	res.daemonCPU = (after.daemonCPU - before.daemonCPU) / float64(n)
	// The bench's own: n creates, its watches, one metrics read.
	res.requests = (after.requests - before.requests - float64(n) - float64(watches.Load()) - 1) / float64(n)
	res.retries = sandboxFailures(ctx, client, id)
	if n == 1 {
		res.sandbox = be.sandboxTimes(podName(id, 0))
	}
	return res, cleanBatch(ctx, be.c, client, id)
}

// follow records each pod's first sight of each step until every pod is
// done or ctx ends. The client's request timeout ends a watch after 30 s:
// a new one starts with the pods' current state.
func follow(ctx context.Context, open func(context.Context) (watch.Interface, error), byName map[string]*podTimes, mu *sync.Mutex) {
	left := len(byName)
	for left > 0 && ctx.Err() == nil {
		w, err := open(ctx)
		if err != nil {
			select { // the API server is busy: try again shortly
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		left = followOne(ctx, w, byName, mu, left)
		w.Stop()
	}
}

func followOne(ctx context.Context, w watch.Interface, byName map[string]*podTimes, mu *sync.Mutex, left int) int {
	for left > 0 {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return left
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			return left
		}
		pod, isPod := ev.Object.(*corev1.Pod)
		if !isPod {
			continue
		}
		mu.Lock()
		p := byName[pod.Name]
		if p != nil && !p.sent.IsZero() && !p.done() {
			p.see(pod, time.Since(p.sent))
			if p.done() {
				left--
			}
		}
		mu.Unlock()
	}
	return left
}

// podsPerNode says how many pods each node got, "node=n ...", sorted.
func podsPerNode(pods []*podTimes) string {
	count := map[string]int{}
	for _, p := range pods {
		count[cmp.Or(p.node, "unscheduled")]++
	}
	var out []string
	for _, node := range slices.Sorted(maps.Keys(count)) {
		out = append(out, fmt.Sprintf("%s=%d", node, count[node]))
	}
	return strings.Join(out, " ")
}

func (p *podTimes) see(pod *corev1.Pod, at time.Duration) {
	set := func(d *time.Duration, cond bool) {
		if cond && *d == 0 {
			*d = at
		}
	}
	set(&p.scheduled, pod.Spec.NodeName != "")
	p.node = cmp.Or(p.node, pod.Spec.NodeName)
	set(&p.sandbox, condTrue(pod, corev1.PodReadyToStartContainers))
	set(&p.run, pod.Status.Phase == corev1.PodRunning)
	set(&p.status, statusEntries(pod) == networks+1)
}

func condTrue(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func statusEntries(pod *corev1.Pod) int {
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(pod.Annotations[statusAnnot]), &entries); err != nil {
		return 0
	}
	return len(entries)
}

// createAll creates the pods at once, one goroutine each, as a
// controller's burst would; spread spreads them over the SR-IOV nodes.
func createAll(ctx context.Context, client kubernetes.Interface, id string, times []*podTimes, spread bool, mu *sync.Mutex) {
	var wg sync.WaitGroup
	for i := range times {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := cnfPod(id, i)
			if spread {
				spreadOverSRIOVNodes(pod)
			}
			mu.Lock()
			times[i].sent = time.Now()
			mu.Unlock()
			_, err := client.CoreV1().Pods(podNS).Create(ctx, pod, metav1.CreateOptions{})
			mu.Lock()
			if err == nil {
				times[i].admitted = time.Since(times[i].sent)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
}

func podName(id string, i int) string { return fmt.Sprintf("bench-%s-%d", id, i) }

// cnfPod is the demo's CNF pod (test/e2e/cmd/hwnet-cluster/cnf-pod.yaml):
// two sriov_netdevice VFs with a static IP (one with a MAC), a DPDK VF on
// vfio-pci and an InfiniBand VF with its GUID, all from NADs.
func cnfPod(id string, i int) *corev1.Pod {
	nets := fmt.Sprintf(`[
  {"name": "sriov-net", "interface": "net1", "ips": ["10.56.0.%d/24"], "mac": "02:00:00:00:aa:%02x"},
  {"name": "sriov-net", "interface": "net2", "ips": ["10.57.0.%[1]d/24"]},
  {"name": "dpdk-net", "interface": "dpdk0"},
  {"name": "ib-net", "interface": "ib0", "infiniband-guid": "c2:00:00:00:00:00:00:%02[2]x"}]`, i+10, i+1)
	devices := corev1.ResourceList{
		"intel.com/sriov_netdevice": resource.MustParse("2"),
		"intel.com/sriov_dpdk":      resource.MustParse("1"),
		"nvidia.com/ib":             resource.MustParse("1"),
	}
	grace := int64(2)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(id, i), Namespace: podNS,
			Labels:      map[string]string{batchLabel: id},
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": nets}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "cnf", Image: image.Workload, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/workload"}, Resources: corev1.ResourceRequirements{Requests: devices, Limits: devices}}},
		},
	}
}

// spreadOverSRIOVNodes keeps the pod to the nodes labelled sriovNodeLabel
// and evens the batch out over them: a node without the label is no
// domain of the spread, so the control plane does not hold it back.
func spreadOverSRIOVNodes(pod *corev1.Pod) {
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: sriovNodeLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"true"}}},
		}}}}}
	pod.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelHostname,
		WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{batchLabel: pod.Labels[batchLabel]}}}}
}

// sandboxFailures counts the batch's FailedCreatePodSandBox events: the
// sandboxes kubelet had to create again.
func sandboxFailures(ctx context.Context, client kubernetes.Interface, id string) int {
	events, err := client.CoreV1().Events(podNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedCreatePodSandBox"})
	if err != nil {
		return -1
	}
	n := 0
	prefix := "bench-" + id + "-"
	for _, ev := range events.Items {
		if strings.HasPrefix(ev.InvolvedObject.Name, prefix) {
			n += int(max(ev.Count, 1))
		}
	}
	return n
}

// cleanBatch deletes the batch's pods and waits until they, and the
// ResourceClaims the scheduler made for DRA-served extended resources,
// are gone: the next batch finds every device free.
func cleanBatch(ctx context.Context, c *cluster.Cluster, client kubernetes.Interface, id string) error {
	sel := batchLabel + "=" + id
	pods := client.CoreV1().Pods(podNS)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel}); err != nil {
		return err
	}
	return cluster.Poll(ctx, 5*time.Minute, "batch "+id+" deleted", func(ctx context.Context) error {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return err
		}
		claims, err := client.ResourceV1().ResourceClaims(podNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items)+len(claims.Items) > 0 {
			return fmt.Errorf("%d pods and %d ResourceClaims left", len(list.Items), len(claims.Items))
		}
		return nil
	})
}
