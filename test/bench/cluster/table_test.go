package cluster

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// table gathers every batch's figures by stack and pod count, and prints
// min/median/max over rounds with the ratios peer/hwnet and
// hwnet-dra/hwnet of the medians.
type table struct {
	batches map[string]map[int][]*batchResult
	rss     map[string][]float64
	notes   []string
}

func newTable() *table {
	return &table{batches: map[string]map[int][]*batchResult{}, rss: map[string][]float64{}}
}

func (t *table) addBatch(stack string, n int, r *batchResult) {
	if t.batches[stack] == nil {
		t.batches[stack] = map[int][]*batchResult{}
	}
	t.batches[stack][n] = append(t.batches[stack][n], r)
}

func (t *table) addRSS(stack string, mib float64) { t.rss[stack] = append(t.rss[stack], mib) }

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// metric is one row: a figure of one batch.
type metric struct {
	name string
	of   func(*batchResult) float64
}

func batchMetrics() []metric {
	return []metric{
		{"create → Running p50, s", func(r *batchResult) float64 { return pct(runTimes(r.pods), 50) }},
		{"create → Running p99, s", func(r *batchResult) float64 { return pct(runTimes(r.pods), 99) }},
		{"create → Running max, s", func(r *batchResult) float64 { return pct(runTimes(r.pods), 100) }},
		{"create → network-status p50, s", func(r *batchResult) float64 { return pct(statusTimes(r.pods), 50) }},
		{"create → network-status max, s", func(r *batchResult) float64 { return pct(statusTimes(r.pods), 100) }},
		{"failures (not Running with network-status)", func(r *batchResult) float64 { return float64(r.failures) }},
		{"sandbox retries (FailedCreatePodSandBox)", func(r *batchResult) float64 { return float64(r.retries) }},
		{"node CPU s per pod (whole cluster cgroup)", func(r *batchResult) float64 { return r.nodeCPU }},
		{"stack daemons' CPU s per pod", func(r *batchResult) float64 { return r.daemonCPU }},
		{"API requests per pod (all clients)", func(r *batchResult) float64 { return r.requests }},
	}
}

// phases split the one-pod batch's time, s.
func phases() []metric {
	at := func(d time.Duration) float64 { return d.Seconds() }
	first := func(r *batchResult) *podTimes { return r.pods[0] }
	sinceSent := func(r *batchResult, t time.Time) float64 {
		if t.IsZero() {
			return math.NaN()
		}
		return t.Sub(first(r).sent).Seconds()
	}
	return []metric{
		{"admission (Create round trip)", func(r *batchResult) float64 { return at(first(r).admitted) }},
		{"scheduling (→ nodeName seen)", func(r *batchResult) float64 { return at(first(r).scheduled - first(r).admitted) }},
		{"kubelet admit + device allocation (→ RunPodSandbox)", func(r *batchResult) float64 {
			return sinceSent(r, r.sandbox.begin) - at(first(r).scheduled)
		}},
		{"sandbox + CNI ADD (RunPodSandbox)", func(r *batchResult) float64 { return r.sandbox.end.Sub(r.sandbox.begin).Seconds() }},
		{"sandbox returned → PodReadyToStartContainers seen", func(r *batchResult) float64 {
			return at(first(r).sandbox) - sinceSent(r, r.sandbox.end)
		}},
		{"container start → Running seen", func(r *batchResult) float64 { return at(first(r).run - first(r).sandbox) }},
		{"network-status seen, from create", func(r *batchResult) float64 { return at(first(r).status) }},
		{"Running seen, from create", func(r *batchResult) float64 { return at(first(r).run) }},
	}
}

// runTimes and statusTimes count a pod that never got there as +Inf, so
// that a percentile past the pods that did shows as a timeout rather
// than as the successes' figure.
func runTimes(pods []*podTimes) []float64 {
	return seconds(pods, func(p *podTimes) time.Duration { return p.run })
}

func statusTimes(pods []*podTimes) []float64 {
	return seconds(pods, func(p *podTimes) time.Duration { return p.status })
}

func seconds(pods []*podTimes, at func(*podTimes) time.Duration) []float64 {
	out := make([]float64, 0, len(pods))
	for _, p := range pods {
		if d := at(p); d > 0 {
			out = append(out, d.Seconds())
		} else {
			out = append(out, math.Inf(1))
		}
	}
	return out
}

// pct is the p-th percentile (nearest rank); NaN of nothing.
func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (t *table) print(w io.Writer, stacks []string, counts []int) {
	fmt.Fprintf(w, "\n| figure | pods | %s | peer/hwnet | hwnet-dra/hwnet |\n", strings.Join(stacks, " | "))
	fmt.Fprintf(w, "|---|---|%s---|---|\n", strings.Repeat("---|", len(stacks)))
	for _, m := range batchMetrics() {
		for _, n := range counts {
			t.row(w, m.name, fmt.Sprint(n), stacks, func(s string) []float64 { return t.values(s, n, m) })
		}
	}
	t.row(w, "stack daemons' peak RSS, MiB", "≤100", stacks, func(s string) []float64 { return t.rss[s] })
	if slices.Contains(counts, 1) {
		fmt.Fprintf(w, "\nWhere one pod's time goes (s, the 1-pod batch):\n\n| phase | %s | peer/hwnet | hwnet-dra/hwnet |\n", strings.Join(stacks, " | "))
		fmt.Fprintf(w, "|---|%s---|---|\n", strings.Repeat("---|", len(stacks)))
		for _, m := range phases() {
			t.row(w, m.name, "", stacks, func(s string) []float64 { return t.values(s, 1, m) })
		}
	}
	fmt.Fprintln(w)
	for _, n := range t.notes {
		fmt.Fprintln(w, n)
	}
}

func (t *table) values(stack string, n int, m metric) []float64 {
	var out []float64
	for _, r := range t.batches[stack][n] {
		out = append(out, m.of(r))
	}
	return out
}

// row prints median (min–max) per stack and the ratios of the medians.
func (t *table) row(w io.Writer, name, pods string, stacks []string, values func(string) []float64) {
	cells := []string{name}
	if pods != "" {
		cells = append(cells, pods)
	}
	// A stack not measured has no median: its ratios are "–", not 0.
	med := map[string]float64{"hwnet": math.NaN(), "hwnet-dra": math.NaN(), "peer": math.NaN()}
	for _, s := range stacks {
		v := values(s)
		med[s] = pct(v, 50)
		cells = append(cells, spread(v))
	}
	cells = append(cells, ratio(med["peer"], med["hwnet"]), ratio(med["hwnet-dra"], med["hwnet"]))
	fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
}

func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	if len(v) == 1 {
		return num(v[0])
	}
	return fmt.Sprintf("%s (%s–%s)", num(pct(v, 50)), num(pct(v, 0)), num(pct(v, 100)))
}

func num(v float64) string {
	switch {
	case math.IsNaN(v):
		return "–"
	case math.IsInf(v, 1):
		return "timeout"
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func ratio(a, b float64) string {
	if math.IsNaN(a) || math.IsNaN(b) || math.IsInf(b, 0) || b == 0 {
		return "–"
	}
	if math.IsInf(a, 1) {
		return "timeout"
	}
	return fmt.Sprintf("%.2fx", a/b)
}
