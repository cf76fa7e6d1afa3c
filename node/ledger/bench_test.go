package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/ledger"
)

// BenchmarkPollIdle is the agent's ledger poll, every --ledger-interval,
// on a full node where nothing changes: 110 pods hold a VF each, and the
// poll only stats the checkpoint and the device-info directory.
func BenchmarkPollIdle(b *testing.B) {
	kubelet, src := newSources(b)
	for i := range 110 {
		kubelet.SetPod("ns", fmt.Sprint("pod-", i), "intel.com/vf", fmt.Sprintf("0000:3b:%02x.%d", 2+i/8, i%8))
	}
	r := ledger.NewReader(src)
	defer r.Close()
	now := time.Now()
	ledger.SetClock(r, func() time.Time { return now })
	r.Poll(b.Context(), true)
	now = now.Add(15 * time.Second) // settled, kubelet's answer not yet stale
	if l := r.Poll(b.Context(), false); len(l.Devices()) != 110 {
		b.Fatalf("%d devices held, want 110", len(l.Devices()))
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Poll(b.Context(), false)
	}
}
