package peers

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// Sizes of the memory part, as the issue states its targets.
const (
	attachedPods = 100
	burstPods    = 150
	burstNets    = 4
)

// benchLoad measures the CNI daemons at rest and under load: idle CPU and
// RSS, RSS with attachedPods pods attached, and a burst of burstPods
// concurrent ADDs (then DELs), as kubelet makes them when a node fills up.
func (e *cniEnv) benchLoad(b *testing.B, t *table, tools []*cniTool, rts map[string]*cniRuntime, vfs int) {
	for _, tool := range tools {
		if tool.daemon == nil {
			continue
		}
		settling, idle := restCPU(tool.daemon.cmd.Process.Pid, *settleFor, *idleFor)
		t.add(fmt.Sprintf("daemon CPU settling after the CNI rounds, %d VFs", vfs), "ms/s", tool.name, settling)
		t.add(fmt.Sprintf("daemon idle CPU, %d VFs, CNI on", vfs), "ms/s", tool.name, idle)
		if *profiles != "" && tool.metrics != "" {
			// What still wakes the idle daemon, over as long again: an
			// execution trace has every wake-up, where a CPU profile
			// samples 100 times a second.
			saveProfile(b, tool.metrics, fmt.Sprintf("trace?seconds=%d", int(idleFor.Seconds())), tool.name+"-idle.trace")
			// And what the idle daemon allocates, which sets how often
			// its garbage collector wakes.
			saveProfile(b, tool.metrics, fmt.Sprintf("allocs?seconds=%d", int(idleFor.Seconds())), tool.name+"-idle-allocs.pb.gz")
		}
		rss, _ := tool.daemon.rssMB()
		t.add(fmt.Sprintf("daemon RSS idle, %d VFs", vfs), "MiB", tool.name, rss)
		attached := e.newPods(b, attachedPods, burstNets)
		for _, pod := range attached {
			if _, err := rts[tool.name].add(context.Background(), pod); err != nil {
				b.Fatalf("%s: ADD %s: %v", tool.name, pod.name, err)
			}
		}
		rss, _ = tool.daemon.rssMB()
		t.add(fmt.Sprintf("daemon RSS, %d VFs, %d pods attached (%d networks each)", vfs, attachedPods, burstNets), "MiB", tool.name, rss)
		anon, file := rssSplitOf(tool.daemon.cmd.Process.Pid)
		t.add("  of which anonymous (heap, stacks, runtime)", "MiB", tool.name, anon)
		t.add("  of which file-backed (the binary's pages)", "MiB", tool.name, file)
		if tool.metrics != "" {
			sections, err := residentSections(tool.daemon.cmd.Process.Pid)
			if err != nil {
				b.Fatalf("%s: %v", tool.name, err)
			}
			t.add("    of those, code (.text)", "MiB", tool.name, sections[".text"])
			t.add("    of those, read-only data (.rodata)", "MiB", tool.name, sections[".rodata"])
			t.add("    of those, function tables (.gopclntab)", "MiB", tool.name, sections[".gopclntab"])
			heap, stacks := goMemory(b, tool.metrics)
			t.add("  Go heap in use, 100 pods attached", "MiB", tool.name, heap)
			t.add("  Go stacks in use, 100 pods attached", "MiB", tool.name, stacks)
			if *profiles != "" {
				// smaps first: writing the profile symbolizes its stacks,
				// which faults in much of the binary's line tables.
				saveSmaps(b, tool.daemon.cmd.Process.Pid, tool.name+"-smaps-100pods.txt")
				saveProfile(b, tool.metrics, "heap", tool.name+"-heap-100pods.pb.gz")
				saveProfile(b, tool.metrics, "goroutine?debug=1", tool.name+"-goroutines-100pods.txt")
				// The runtime's own accounting (stacks, spans, GC metadata)
				// and the threads it made, which the RSS rows hold.
				saveProfile(b, tool.metrics, "heap?debug=1", tool.name+"-memstats-100pods.txt")
				saveProfile(b, tool.metrics, "threadcreate?debug=1", tool.name+"-threads-100pods.txt")
			}
		}
		e.burst(b, t, tool, rts[tool.name])
		e.detach(b, tool, rts[tool.name], attached)
	}
	t.note("Load: after the CNI rounds, on the same daemons (the agent on a %d-VF node): idle CPU over %v, from %v after the rounds (the CPU of those %[3]v is the settling row); %d pods ADDed one by one and kept; then %d pods ADDed at once (%d networks each), then DELed at once. Peak RSS is the kernel's VmHWM since the daemon started.",
		vfs, *idleFor, *settleFor, attachedPods, burstPods, burstNets)
}

// burst runs burstPods ADDs at once, then their DELs at once, and records
// the ADDs' p50 and p99, failures and the daemon's peak RSS.
func (e *cniEnv) burst(b *testing.B, t *table, tool *cniTool, rt *cniRuntime) {
	pods := e.newPods(b, burstPods, burstNets)
	defer e.deletePods(b, pods)
	var mu sync.Mutex
	var lat samples
	failed := 0
	run := func(op func(context.Context, benchPod) (plugRun, error)) {
		var wg sync.WaitGroup
		for _, pod := range pods {
			wg.Go(func() {
				start := time.Now()
				_, err := op(context.Background(), pod)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
					b.Logf("%s: %v", tool.name, err)
					return
				}
				lat = append(lat, ms(time.Since(start)))
			})
		}
		wg.Wait()
	}
	run(rt.addConcurrent)
	key := fmt.Sprintf(", burst of %d concurrent ADDs", burstPods)
	t.add("ADD p50"+key, "ms", tool.name, lat.pct(50))
	t.add("ADD p99"+key, "ms", tool.name, lat.pct(99))
	t.add("failed ADDs"+key, "count", tool.name, float64(failed))
	_, peak := tool.daemon.rssMB()
	t.add("daemon peak RSS through the burst", "MiB", tool.name, peak)
	lat, failed = nil, 0
	run(rt.delConcurrent)
	t.add("failed DELs, burst", "count", tool.name, float64(failed))
	rt.exec.take() // the concurrent runs' records, unused
}

// detach DELs pods one by one and deletes them.
func (e *cniEnv) detach(b *testing.B, tool *cniTool, rt *cniRuntime, pods []benchPod) {
	for _, pod := range pods {
		if _, err := rt.del(context.Background(), pod); err != nil {
			b.Fatalf("%s: DEL %s: %v", tool.name, pod.name, err)
		}
	}
	e.deletePods(b, pods)
}
