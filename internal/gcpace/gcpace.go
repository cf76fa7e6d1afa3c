// Package gcpace keeps the garbage collector collecting at the pace GOGC
// asks for while taking away the collection Go forces every two minutes on
// an idle process.
package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Pacer replaces GOGC's heap goal with a memory limit it moves after
// every collection. The runtime forces a collection every two minutes
// whatever the heap did, unless GOGC is off (runtime/mgc.go,
// gcTrigger.test); on an idle agent with 2048 VFs that collection is most
// of the CPU it spends (a 7-10 ms mark and a 1.7 ms sweep of a 7.7 MB
// heap). With GOGC off and the limit moved to where GOGC would have put
// the heap goal, a busy agent collects as often as before and an idle
// one only when its heap has grown by GOGC percent.
type Pacer struct {
	percent uint64 // the GOGC in force when the pacer started
	ceiling int64  // the memory limit in force when the pacer started

	mu      sync.Mutex
	stopped bool
	samples []metrics.Sample
}

// The runtime/metrics the limit is computed from.
const (
	metricTotal    = "/memory/classes/total:bytes"
	metricReleased = "/memory/classes/heap/released:bytes"
	metricFree     = "/memory/classes/heap/free:bytes"
	metricObjects  = "/memory/classes/heap/objects:bytes"
	metricLive     = "/gc/heap/live:bytes"
	metricStacks   = "/gc/scan/stack:bytes"
	metricGlobals  = "/gc/scan/globals:bytes"
)

// The runtime's constants the limit has to match (runtime/mgcpacer.go):
// the heap goal's floor at GOGC=100 and the headroom the runtime takes
// off a limit-based goal.
const (
	heapMinimum        = 4 << 20
	headroomPercent    = 3
	headroomMinimum    = 1 << 20
	percentDenominator = 100
)

// Start turns GOGC off and paces collections with the memory limit until
// Stop. It returns nil, and changes nothing, when GOGC is already off:
// then the admin chose to collect by the memory limit alone.
func Start() *Pacer {
	percent := debug.SetGCPercent(-1)
	if percent < 0 {
		return nil
	}
	p := &Pacer{percent: uint64(percent), ceiling: debug.SetMemoryLimit(-1)}
	for _, name := range []string{metricTotal, metricReleased, metricFree, metricObjects, metricLive, metricStacks, metricGlobals} {
		p.samples = append(p.samples, metrics.Sample{Name: name})
	}
	p.pace()
	return p
}

// Stop gives the runtime back the GOGC and memory limit it had before
// Start. Stop on a nil Pacer does nothing.
func (p *Pacer) Stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	debug.SetMemoryLimit(p.ceiling)
	debug.SetGCPercent(int(p.percent))
}

// sentinel is garbage whose cleanup runs after each collection. It holds
// a pointer so the allocator does not pack it with other small objects,
// which would keep it alive as long as they live.
type sentinel struct{ _ *byte }

// pace sets the memory limit for the collection to come and arms the
// sentinel that calls it again after that one.
func (p *Pacer) pace() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	debug.SetMemoryLimit(p.limit())
	runtime.AddCleanup(&sentinel{}, (*Pacer).pace, p)
}

// limit is the memory limit at which the runtime's limit-based heap goal
// equals the heap goal GOGC would set now, capped at the limit the admin
// set.
func (p *Pacer) limit() int64 {
	metrics.Read(p.samples)
	v := make(map[string]uint64, len(p.samples))
	for _, s := range p.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[s.Name] = s.Value.Uint64()
		}
	}
	return min(p.ceiling, limitFor(p.percent, v))
}

// limitFor is limit's arithmetic on one reading of the runtime's metrics.
// The runtime's goal under a memory limit is the limit less the memory
// that is not heap, less a headroom (runtime/mgcpacer.go,
// memoryLimitHeapGoal); GOGC's goal is the live heap plus percent of the
// live heap, the stacks and the globals, and at least percent of 4 MiB.
func limitFor(percent uint64, v map[string]uint64) int64 {
	live := v[metricLive]
	goal := live + (live+v[metricStacks]+v[metricGlobals])*percent/percentDenominator
	goal = max(goal, heapMinimum*percent/percentDenominator)
	inUse := v[metricTotal] - v[metricReleased]
	nonHeap := inUse - min(inUse, v[metricFree]+v[metricObjects])
	withHeadroom := max(goal+headroomMinimum, goal*percentDenominator/(percentDenominator-headroomPercent))
	return int64(min(nonHeap+withHeadroom, 1<<62))
}
