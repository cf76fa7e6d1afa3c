package peers

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// samples are measurements of one metric of one tool, in the row's unit.
type samples []float64

func (s samples) sorted() samples { c := slices.Clone(s); slices.Sort(c); return c }

// pct is the p-th percentile (0-100), nearest rank.
func (s samples) pct(p float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	c := s.sorted()
	i := int(math.Ceil(p/100*float64(len(c)))) - 1
	return c[max(i, 0)]
}

func (s samples) median() float64 { return s.pct(50) }

// over counts the samples above limit.
func (s samples) over(limit float64) int {
	n := 0
	for _, v := range s {
		if v > limit {
			n++
		}
	}
	return n
}

// row is one line of the table: a metric measured for every tool.
type row struct {
	metric string
	unit   string
	// by tool name; a tool without samples is absent or not applicable.
	values map[string]samples
}

// table collects rows in the order they were measured.
type table struct {
	tools []string // hwnet first: ratios are to it
	rows  []*row
	notes []string
}

// add records samples of metric for tool, creating the row on first use.
func (t *table) add(metric, unit, tool string, v ...float64) {
	r := t.row(metric, unit)
	r.values[tool] = append(r.values[tool], v...)
}

func (t *table) row(metric, unit string) *row {
	for _, r := range t.rows {
		if r.metric == metric {
			return r
		}
	}
	r := &row{metric: metric, unit: unit, values: map[string]samples{}}
	t.rows = append(t.rows, r)
	return r
}

func (t *table) note(format string, args ...any) {
	t.notes = append(t.notes, fmt.Sprintf(format, args...))
}

// print writes the table as Markdown: per tool min/median/max (or the one
// figure), then each peer's median over hwnet's.
func (t *table) print(w io.Writer) {
	head := []string{"metric", "unit"}
	head = append(head, t.tools...)
	for _, p := range t.tools[1:] {
		head = append(head, p+"/"+t.tools[0])
	}
	fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
	fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
	for _, r := range t.rows {
		cells := []string{r.metric, r.unit}
		for _, tool := range t.tools {
			cells = append(cells, r.cell(tool))
		}
		base := r.values[t.tools[0]]
		for _, p := range t.tools[1:] {
			cells = append(cells, ratio(r.values[p], base))
		}
		fmt.Fprintln(w, "| "+strings.Join(cells, " | ")+" |")
	}
	for _, n := range t.notes {
		fmt.Fprintln(w, "\n"+n)
	}
}

func (r *row) cell(tool string) string {
	s := r.values[tool]
	switch {
	case len(s) == 0:
		return "-"
	case len(s) == 1:
		return num(s[0])
	}
	c := s.sorted()
	return num(c[0]) + " / **" + num(s.median()) + "** / " + num(c[len(c)-1])
}

func ratio(peer, base samples) string {
	if len(peer) == 0 || len(base) == 0 || base.median() == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1fx", peer.median()/base.median())
}

// num prints 3 significant digits, without exponent.
func num(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}
