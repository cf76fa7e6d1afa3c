package cluster

import (
	"math"
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
