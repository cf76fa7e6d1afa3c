package agent

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/ledger"
)

// TestLedgerWarningsStand: the device ledger's warning that a source
// cannot be read is logged when the source fails, not again while it
// stays failed, as cleared when it reads again, and again when it fails
// once more: an operator reading the log sees every outage of a source
// the agent fails closed on.
func TestLedgerWarningsStand(t *testing.T) {
	const kubelet, checkpoint = "kubelet PodResources: connection refused", "dra checkpoint: unreadable"
	steps := []struct {
		unknown []string
		want    []string // the lines this step logs, each by level and warning
	}{
		{unknown: []string{kubelet}, want: []string{"WARN " + kubelet}},
		{unknown: []string{kubelet}},
		{unknown: []string{kubelet, checkpoint}, want: []string{"WARN " + checkpoint}},
		{unknown: []string{checkpoint}, want: []string{"INFO " + kubelet}},
		{want: []string{"INFO " + checkpoint}},
		{},
		{unknown: []string{kubelet}, want: []string{"WARN " + kubelet}},
	}
	var logs bytes.Buffer
	a := &Agent{log: slog.New(slog.NewJSONHandler(&logs, nil))}
	for i, step := range steps {
		logs.Reset()
		a.reportLedger(&ledger.Ledger{Unknown: step.unknown})
		if got := logged(t, logs.String()); !slices.Equal(got, step.want) {
			t.Fatalf("step %d (unknown %q): logged %q, want %q", i, step.unknown, got, step.want)
		}
	}
}

// logged is each record a JSON handler wrote as its level and its
// warning attribute.
func logged(t *testing.T, out string) []string {
	var lines []string
	for line := range strings.Lines(out) {
		var r struct{ Level, Warning string }
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		lines = append(lines, r.Level+" "+r.Warning)
	}
	return lines
}
