package gcpace

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

const mib = 1 << 20

func TestLimitFor(t *testing.T) {
	for _, tt := range []struct {
		name    string
		percent uint64
		v       map[string]uint64
		want    int64
	}{{
		name:    "small heap: GOGC's 4 MiB floor and the runtime's 1 MiB headroom",
		percent: 50,
		v:       map[string]uint64{metricTotal: 30 * mib, metricReleased: 2 * mib, metricFree: 3 * mib, metricObjects: 5 * mib, metricLive: 1 * mib},
		want:    (30-2-3-5)*mib + 2*mib + 1*mib,
	}, {
		name:    "large heap: goal from live heap, stacks and globals, 3% headroom",
		percent: 100,
		v: map[string]uint64{metricTotal: 300 * mib, metricReleased: 10 * mib, metricFree: 20 * mib, metricObjects: 250 * mib,
			metricLive: 194 * mib, metricStacks: 2 * mib, metricGlobals: 1 * mib},
		want: 20*mib + (194+197)*mib*100/97,
	}, {
		name:    "a torn reading with more heap than memory counts nothing as non-heap",
		percent: 100,
		v:       map[string]uint64{metricTotal: 10 * mib, metricFree: 8 * mib, metricObjects: 8 * mib, metricLive: 8 * mib},
		want:    16*mib + 1*mib,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			if got := limitFor(tt.percent, tt.v); got != tt.want {
				t.Errorf("limitFor(%d, %v) = %d, want %d", tt.percent, tt.v, got, tt.want)
			}
		})
	}
}

// runtimeSettings sets GOGC and the memory limit for one test and gives
// the process its own back when the test ends.
func runtimeSettings(t *testing.T, percent int, limit int64) {
	t.Helper()
	oldPercent, oldLimit := debug.SetGCPercent(percent), debug.SetMemoryLimit(limit)
	t.Cleanup(func() {
		debug.SetGCPercent(oldPercent)
		debug.SetMemoryLimit(oldLimit)
	})
}

func readUint64(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func readGOGC() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

func TestStartStop(t *testing.T) {
	const ceiling = 1 << 30
	for _, tt := range []struct {
		name        string
		percent     int
		wantPaced   bool
		wantPercent int64
	}{
		{name: "GOGC=50 is paced by the limit", percent: 50, wantPaced: true, wantPercent: -1},
		{name: "GOGC=off is the admin's choice and left alone", percent: -1, wantPaced: false, wantPercent: -1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			runtimeSettings(t, tt.percent, ceiling)
			p := Start()
			if (p != nil) != tt.wantPaced {
				t.Fatalf("Start() = %v, want a pacer: %t", p, tt.wantPaced)
			}
			if got := readGOGC(); got != tt.wantPercent {
				t.Errorf("GOGC while started = %d, want %d", got, tt.wantPercent)
			}
			limit := int64(readUint64("/gc/gomemlimit:bytes"))
			if tt.wantPaced && (limit <= 0 || limit >= ceiling) {
				t.Errorf("memory limit while paced = %d, want below the admin's %d", limit, ceiling)
			}
			if !tt.wantPaced && limit != ceiling {
				t.Errorf("memory limit = %d, want the admin's %d untouched", limit, ceiling)
			}
			p.Stop()
			if got := readGOGC(); got != int64(tt.percent) {
				t.Errorf("GOGC after Stop = %d, want %d", got, tt.percent)
			}
			if got := readUint64("/gc/gomemlimit:bytes"); got != ceiling {
				t.Errorf("memory limit after Stop = %d, want %d", got, ceiling)
			}
		})
	}
}

// collectUntil runs collections until cond holds: the pacer moves the
// limit in a cleanup that runs some time after a collection ends, so one
// collection may not be enough, but a hundred are.
func collectUntil(t *testing.T, what string, cond func(limit uint64) bool) {
	t.Helper()
	for range 100 {
		if cond(readUint64("/gc/gomemlimit:bytes")) {
			return
		}
		runtime.GC()
		runtime.Gosched()
	}
	t.Fatalf("memory limit %d after 100 collections: never %s", readUint64("/gc/gomemlimit:bytes"), what)
}

func TestLimitFollowsLiveHeap(t *testing.T) {
	runtimeSettings(t, 50, 1<<40)
	p := Start()
	t.Cleanup(p.Stop)

	live := make([]*int, 8*mib) // 64 MiB that the collector has to scan
	collectUntil(t, "rose with 64 MiB more live heap", func(limit uint64) bool { return limit >= 64*mib*3/2 })
	runtime.KeepAlive(live)
	live = nil
	collectUntil(t, "fell once the 64 MiB were garbage", func(limit uint64) bool { return limit < 64*mib })
}

func TestGarbageCollectedWhilePaced(t *testing.T) {
	runtimeSettings(t, 50, 1<<40)
	p := Start()
	t.Cleanup(p.Stop)
	runtime.GC()

	cyclesBefore := readUint64("/gc/cycles/total:gc-cycles")
	var peak uint64
	for range 512 {
		garbage := make([]*int, mib/8) // 1 MiB
		runtime.KeepAlive(garbage)
		peak = max(peak, readUint64("/memory/classes/heap/objects:bytes"))
	}
	if cycles := readUint64("/gc/cycles/total:gc-cycles") - cyclesBefore; cycles < 8 {
		t.Errorf("%d collections while 512 MiB of garbage was allocated, want at least 8", cycles)
	}
	if peak > 96*mib {
		t.Errorf("heap objects peaked at %d MiB, want the paced goal to hold it under 96 MiB", peak/mib)
	}
}
