package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/chain"
)

// timedExec runs plugins for real and adds up the time spent in them, so
// a benchmark can tell the delegator's own time from its children's.
type timedExec struct {
	invoke.Exec
	plugins atomic.Int64
	runs    atomic.Int64
}

func (e *timedExec) ExecPlugin(ctx context.Context, path string, stdin []byte, env []string) ([]byte, error) {
	start := time.Now()
	out, err := e.Exec.ExecPlugin(ctx, path, stdin, env)
	e.plugins.Add(int64(time.Since(start)))
	e.runs.Add(1)
	return out, err
}

// answerExec stands in for the plugins' processes by answering each call
// at once, so a benchmark sees the delegator's time alone, free of the
// noise of subtracting processes' run time from the total.
type answerExec struct {
	version.PluginDecoder
}

func (answerExec) FindInPath(plugin string, _ []string) (string, error) {
	return "/answer/" + plugin, nil
}

func (answerExec) ExecPlugin(_ context.Context, _ string, stdin []byte, env []string) ([]byte, error) {
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	if vars["CNI_COMMAND"] != "ADD" {
		return nil, nil
	}
	return fmt.Appendf(nil, `{"cniVersion":%q,"interfaces":[{"name":%q,"mac":"02:00:00:00:00:01","sandbox":%q}],"ips":[{"address":"10.0.0.2/24","interface":0}]}`,
		conf.CNIVersion, vars["CNI_IFNAME"], vars["CNI_NETNS"]), nil
}

// BenchmarkAdd is one pod ADD with the default network and four
// attachments, each with a device from PodResources, through a real API
// server's caches. delegator-ms/op (mean) and delegator-p50-ms (median) are
// the time ADD took minus the time its child plugins ran: with the real plugin processes ("exec"), and with an
// in-process stand-in that answers at once ("answer"), which shows the
// delegator's own time without the noise of timing processes. The API
// server requests are counted per ADD: reads must be zero, the one write the
// network-status PATCH.
func BenchmarkAdd(b *testing.B) {
	b.Run("exec", func(b *testing.B) {
		benchmarkAdd(b, &timedExec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{}, PluginDecoder: version.PluginDecoder{}}})
	})
	b.Run("answer", func(b *testing.B) { benchmarkAdd(b, &timedExec{Exec: &answerExec{}}) })
}

func benchmarkAdd(b *testing.B, exec *timedExec) {
	n := newHarness(b)
	state := b.TempDir()
	n.d.opts.Exec = exec
	// A node keeps CNI device-info on tmpfs (/var/run) whatever disk holds
	// the records, which stay in TMPDIR.
	if shm, err := os.MkdirTemp("/dev/shm", "hwnet-devinfo-"); err == nil {
		b.Cleanup(func() { os.RemoveAll(shm) })
		n.d.opts.CNIDevinfoDir = shm
	}
	n.conf = recorderDefault(b, n)
	for i := range 4 {
		n.createNAD(podNS, fmt.Sprintf("net%d", i), sriovRes, recorderNAD(fmt.Sprintf("net%d", i), state, `,"capabilities":{"mac":true}`))
	}
	networks := `[{"name":"net0","mac":"02:00:00:00:00:01"},{"name":"net1"},{"name":"net2"},{"name":"net3"}]`
	ids := []string{"0000:3b:02.0", "0000:3b:02.1", "0000:3b:02.2", "0000:3b:02.3"}
	ctx := context.Background()
	var own []time.Duration
	reads, writes := 0, 0
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		name := fmt.Sprintf("bench-%d", i)
		pod := n.createPod(name, networks, map[string][]string{sriovRes: ids})
		waitPod(b, n, pod.Namespace, name)
		// The API server and etcd share this machine's CPUs; on a real
		// node they run elsewhere. Let them finish with the pod's creation
		// before the ADD is timed.
		time.Sleep(100 * time.Millisecond)
		n.counter.Reset()
		exec.plugins.Store(0)
		b.StartTimer()
		start := time.Now()
		if _, err := n.d.Handle(ctx, n.request("ADD", name, pod)); err != nil {
			b.Fatal(err)
		}
		own = append(own, time.Since(start)-time.Duration(exec.plugins.Load()))
		b.StopTimer()
		if err := n.d.Close(ctx); err != nil {
			b.Fatal(err)
		}
		r, w := countRequests(n.counter.Snapshot())
		reads, writes = reads+r, writes+w
		if _, err := n.d.Handle(ctx, n.request("DEL", name, pod)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	var total time.Duration
	for _, d := range own {
		total += d
	}
	slices.Sort(own)
	b.ReportMetric(float64(total.Microseconds())/1000/float64(len(own)), "delegator-ms/op")
	// The median shows the delegator's time apart from the moments the
	// API server, etcd and the plugin processes take these two CPUs.
	b.ReportMetric(float64(own[len(own)/2].Microseconds())/1000, "delegator-p50-ms")
	b.ReportMetric(float64(reads)/float64(b.N), "apiserver-reads/op")
	b.ReportMetric(float64(writes)/float64(b.N), "apiserver-writes/op")
}

// countRequests splits API server requests into reads and writes; Events
// are counted apart from writes to the pod, since they are asynchronous.
func countRequests(snap map[string]int) (reads, writes int) {
	for key, c := range snap {
		switch {
		case strings.HasPrefix(key, "GET "), strings.HasPrefix(key, "LIST "):
			reads += c
		case strings.HasSuffix(key, " pods") && !strings.HasPrefix(key, "WATCH "):
			writes += c
		}
	}
	return reads, writes
}

func recorderDefault(b *testing.B, n *testNode) []byte {
	path := filepath.Join(n.dir, "net.d", "10-podnet.conflist")
	writeFile(b, path, `{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","personality":"plain"}]}`)
	return n.conf
}

// BenchmarkStatus is the runtime's STATUS (containerd 2.x asks it for
// kubelet every 5 s) on a node with 100 containers on record, the last of
// them started a while ago, the default network's list a CNI 1.1.0 one
// with one plugin, run for real: with the plugins run at every ask
// ("every-ask") and with a pass reused for 30 s, the agent's default
// ("reuse-30s"). plugin-execs/op is how many plugin processes one STATUS
// ran.
func BenchmarkStatus(b *testing.B) {
	for _, bc := range []struct {
		name  string
		reuse time.Duration
	}{{"every-ask", 0}, {"reuse-30s", 30 * time.Second}} {
		b.Run(bc.name, func(b *testing.B) { benchmarkStatus(b, bc.reuse) })
	}
}

func benchmarkStatus(b *testing.B, reuse time.Duration) {
	n := newHarness(b)
	exec := &timedExec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{}, PluginDecoder: version.PluginDecoder{}}}
	n.d.opts.Exec = exec
	n.d.statusMemo = chain.NewStatusMemo(reuse, time.Now)
	writeFile(b, filepath.Join(n.dir, "net.d", "10-podnet.conflist"),
		`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","personality":"plain"}]}`)
	ctx := context.Background()
	for i := range 100 {
		if _, err := n.d.Handle(ctx, n.request("ADD", fmt.Sprintf("c%03d", i), nil)); err != nil {
			b.Fatal(err)
		}
	}
	long := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(n.dir, "cache", "containers"), long, long); err != nil {
		b.Fatal(err)
	}
	exec.runs.Store(0)
	for b.Loop() {
		if _, err := n.d.Handle(ctx, n.request("STATUS", "", nil)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(exec.runs.Load())/float64(b.N), "plugin-execs/op")
}
