package ledger

import (
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/internal/wakeup"
)

// TestWaitPollReleasesTheNudge: however waitPoll decides a poll is due
// (the timer, or a change come nudgeGap after the last poll), the nudge
// it held while the poll was scheduled goes through again: a nudge still
// held after the poll would be dropped until the idle poll, 30 s on.
func TestWaitPollReleasesTheNudge(t *testing.T) {
	tests := []struct {
		name    string
		timer   time.Duration
		changed bool
	}{
		{"the timer fired", 0, false},
		{"a change after the gap", time.Hour, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nudge := wakeup.New()
			nudge.Hold()
			changed := make(chan struct{}, 1)
			if tt.changed {
				changed <- struct{}{}
			}
			timer := time.NewTimer(tt.timer)
			defer timer.Stop()
			due := time.Now().Add(tt.timer)
			if !waitPoll(t.Context(), nudge, changed, timer, &due, time.Now().Add(-time.Hour)) {
				t.Fatal("waitPoll returned false before its context ended")
			}
			nudge.Send()
			select {
			case <-nudge.C():
			default:
				t.Fatal("a nudge after the poll was dropped: the nudge is still held")
			}
		})
	}
}
