package peers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/testkubelet"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// dpConfig is the pool both device plugins serve: every iavf VF of the
// E810-Cs, in the format both read.
const dpConfig = `{"resourceList": [{"resourceName": "bench_vfs",
  "selectors": {"vendors": ["8086"], "devices": ["1889"], "drivers": ["iavf"]}}]}`

const dpResource = "intel.com/bench_vfs"

// benchNamespace is where the device plugin runs' pods are, as kubelet's
// PodResources lists them.
const benchNamespace = "bench"

// dpNode builds a node of 8 E810-C PFs sharing vfs VFs, as a real
// 2048-VF node has them (256 a PF at most).
func dpNode(tb testing.TB, vfs int) *virtualnode.Node {
	spec := &virtualnode.Spec{Name: fmt.Sprintf("peers-%d", vfs), PFs: []virtualnode.PFSpec{{Model: "E810-C", Count: 8, VFs: vfs / 8}}}
	return vnodetest.BuildForTest(tb, spec, vnodetest.OpenDB(tb), true)
}

// dpTool is a device plugin under test: how to start it with kubelet's
// directory bound where it expects it.
type dpTool struct {
	name string
	args func(config string) []string
}

// dpRun is one start of a device plugin on a node, up to kubelet having
// its whole list.
type dpRun struct {
	p       *proc
	kubelet *testkubelet.Kubelet
	devices []string
	// podres is kubelet's PodResources: it lists the pods allocate
	// starts, each until a later one is given its device.
	podres *testkubelet.PodResources
	pods   podLedger
}

// podLedger is which of the bench's pods kubelet runs with each device.
type podLedger map[string]string

// start records pod with ids, ending first the pods that had any of
// them, as kubelet gives a device to one running pod at a time.
func (l podLedger) start(pr *testkubelet.PodResources, pod string, ids []string) {
	for _, id := range ids {
		if old, ok := l[id]; ok {
			l.end(pr, old)
		}
	}
	for _, id := range ids {
		l[id] = pod
	}
	pr.SetPod(benchNamespace, pod, dpResource, ids...)
}

func (l podLedger) end(pr *testkubelet.PodResources, pod string) {
	for id, p := range l {
		if p == pod {
			delete(l, id)
		}
	}
	pr.SetPod(benchNamespace, pod, dpResource)
}

// startDP starts tool in the node with a fresh kubelet and waits until
// its pool is registered and the first ListAndWatch answer lists every
// VF. It records start-up time, the CPU spent by then and the RSS.
func startDP(tb testing.TB, t *table, node *virtualnode.Node, tool dpTool, vfs int) *dpRun {
	tb.Helper()
	dir := sockdir.New(tb)
	k, err := testkubelet.Start(filepath.Join(dir, "dp"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(k.Close)
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(dpConfig), 0o644); err != nil {
		tb.Fatal(err)
	}
	// Both find kubelet at its usual path, and write device-info files
	// to a tmpfs of their own, in their own mount namespace. hwnet-agent
	// reads who holds what from kubelet's PodResources and the DRA
	// plugins' checkpoints before it hands anything out.
	podres := filepath.Join(dir, "pod-resources")
	pr := servePodResources(tb, filepath.Join(podres, "kubelet.sock"))
	mounts := []mount{{"", "/var/lib"}, {k.Dir, "/var/lib/kubelet/device-plugins"}, {podres, "/var/lib/kubelet/pod-resources"},
		{"", "/var/lib/kubelet/plugins"}, {"", "/var/lib/hwnet"}, {"", "/run/k8s.cni.cncf.io"}}
	p := startIn(tb, node, tool.name, mounts, tool.args(config)...)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ctx, cancelAlive := p.alive(ctx)
	defer cancelAlive()
	st, err := k.Wait(ctx, dpResource, func(st testkubelet.State) bool {
		return st.Registered && st.Lists > 0 && len(st.Devices) == vfs
	})
	elapsed, cpu := time.Since(p.started), p.cpu()
	if err != nil {
		tb.Fatalf("%s with %d VFs: %v\nlog:\n%s", tool.name, vfs, err, p.tail())
	}
	rss, _ := p.rssMB()
	key := fmt.Sprintf(" at %d VFs", vfs)
	t.add("start to registered + first ListAndWatch"+key, "ms", tool.name, ms(elapsed))
	t.add("CPU from exec to registered"+key, "ms", tool.name, ms(cpu))
	t.add("RSS when registered"+key, "MiB", tool.name, rss)
	run := &dpRun{p: p, kubelet: k, podres: pr, pods: podLedger{}}
	for _, d := range st.Devices {
		run.devices = append(run.devices, d.ID)
	}
	return run
}

// allocate times calls Allocate calls of size devices each, over gRPC as
// kubelet makes them, and records their p50 and p99.
func (r *dpRun) allocate(tb testing.TB, t *table, size, calls int) {
	tb.Helper()
	ctx := context.Background()
	lat := make(samples, 0, calls)
	for i := range calls {
		ids := make([]string, size)
		for j := range ids {
			ids[j] = r.devices[(i*size+j)%len(r.devices)]
		}
		start := time.Now()
		if _, err := r.kubelet.Allocate(ctx, dpResource, ids...); err != nil {
			tb.Fatalf("%s: Allocate %v: %v", r.p.name, ids, err)
		}
		lat = append(lat, ms(time.Since(start)))
		r.pods.start(r.podres, fmt.Sprintf("pod-%d-%d", size, i), ids)
	}
	t.add(fmt.Sprintf("Allocate p50, %d device(s)", size), "ms", r.p.name, lat.pct(50))
	t.add(fmt.Sprintf("Allocate p99, %d device(s)", size), "ms", r.p.name, lat.pct(99))
}

// idle records the CPU the daemon burns per second while it settles
// after the Allocates and then while nothing happens, and its RSS
// afterwards.
func (r *dpRun) idle(t *table, settle, window time.Duration, vfs int) {
	atRest(t, r.p, r.p.name, settle, window, fmt.Sprintf("after the Allocates, at %d VFs", vfs), fmt.Sprintf("at %d VFs", vfs))
}

// atRest records the CPU p burns per second while it settles and then
// while nothing happens, and its resident set afterwards; after names the
// requests it settles from, where the mode and size the rows are of.
func atRest(t *table, p *proc, tool string, settle, window time.Duration, after, where string) {
	settling, idle := restCPU(p.cmd.Process.Pid, settle, window)
	t.add("CPU settling "+after, "ms/s", tool, settling)
	t.add("idle CPU "+where, "ms/s", tool, idle)
	rss, _ := p.rssMB()
	t.add("RSS idle "+where, "MiB", tool, rss)
	addRSSSplit(t, p, tool, "idle "+where)
}

// addRSSSplit adds rows for the anonymous and the file-backed part of
// p's resident set now (when: the row above says): the binary's pages a
// mode's code paths touched are a large part of the difference between
// the modes, and the kernel can drop them.
func addRSSSplit(t *table, p *proc, tool, when string) {
	anon, file := rssSplitOf(p.cmd.Process.Pid)
	t.add("  of which anonymous, "+when, "MiB", tool, anon)
	t.add("  of which file-backed (the binary's pages), "+when, "MiB", tool, file)
}

func (r *dpRun) stop() {
	r.p.stop()
	r.kubelet.Close()
}

// servePodResources serves kubelet's PodResources at path, with no pods
// yet, until the test ends, as a kubelet that has run for an hour: an agent
// that starts within --kubelet-settle of kubelet hands nothing out until
// kubelet had time to list every pod it runs.
func servePodResources(tb testing.TB, path string) *testkubelet.PodResources {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	pr, err := testkubelet.ServePodResources(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(pr.Close)
	started := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, started, started); err != nil {
		tb.Fatal(err)
	}
	return pr
}
