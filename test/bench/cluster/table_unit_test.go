package cluster

import (
	"math"
	"strings"
	"testing"
	"time"
)

// A batch's percentiles must not hide the pods that never started: past
// the share that did, they read as a timeout, as must the ratio.
func TestPercentilesCountTimedOutPods(t *testing.T) {
	pods := []*podTimes{{run: time.Second}, {run: 2 * time.Second}, {}, {}}
	for _, tc := range []struct {
		p    float64
		want string
	}{{25, "1"}, {50, "2"}, {75, "timeout"}, {100, "timeout"}} {
		if got := num(pct(runTimes(pods), tc.p)); got != tc.want {
			t.Errorf("p%v = %s, want %s", tc.p, got, tc.want)
		}
	}
	if got := ratio(math.Inf(1), 2); got != "timeout" {
		t.Errorf("ratio of a timeout = %s, want timeout", got)
	}
}

// A run without the peer (-stacks hwnet,hwnet-dra) has no peer/hwnet
// ratio: "–", not 0.00x.
func TestRatioOfStackNotMeasured(t *testing.T) {
	var out strings.Builder
	tab := newTable()
	tab.row(&out, "x", "1", []string{"hwnet", "hwnet-dra"}, func(string) []float64 { return []float64{2} })
	if got, want := out.String(), "| x | 1 | 2 | 2 | – | 1.00x |\n"; got != want {
		t.Errorf("row = %q, want %q", got, want)
	}
}

// With workers, the control plane has no SR-IOV hardware and each worker
// the bench node's, under a name of its own.
func TestNodeSpecs(t *testing.T) {
	cp, workers, err := nodeSpecs(3)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Name != "hwnet-bench" || len(cp.PFs) != 0 {
		t.Errorf("control plane %q with %d PFs, want hwnet-bench with none", cp.Name, len(cp.PFs))
	}
	if len(workers) != 2 || workers[0].Name != "hwnet-bench-w1" || workers[1].Name != "hwnet-bench-w2" {
		t.Fatalf("workers %v, want hwnet-bench-w1 and -w2", workers)
	}
	for _, w := range workers {
		if len(w.PFs) != 2 {
			t.Errorf("worker %s has %d PF entries, want testdata/node.yaml's 2", w.Name, len(w.PFs))
		}
	}
	if cp, workers, err := nodeSpecs(1); err != nil || cp.Name != "hwnet-bench" || len(cp.PFs) != 2 || workers != nil {
		t.Errorf("one node: %v %v %v, want testdata/node.yaml alone", cp, workers, err)
	}
	for _, n := range []int{0, maxNodes + 1} {
		if _, _, err := nodeSpecs(n); err == nil || !strings.Contains(err.Error(), "-nodes") {
			t.Errorf("nodeSpecs(%d): err %v, want one naming -nodes", n, err)
		}
	}
}

// podsPerNode shows how a batch was spread, the unscheduled included.
func TestPodsPerNode(t *testing.T) {
	pods := []*podTimes{{node: "w2"}, {node: "w1"}, {node: "w2"}, {}}
	if got, want := podsPerNode(pods), "unscheduled=1 w1=1 w2=2"; got != want {
		t.Errorf("podsPerNode = %q, want %q", got, want)
	}
}
