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
