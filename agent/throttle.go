package agent

import "time"

// ledgerRefreshGap is the least time between two refreshes of every pool
// after the device ledger changed. Each hand-out changes the ledger, and a
// refresh weighs every device of every pool again: at 2048 VFs, a burst
// of prepares or Allocates kept a core busy refreshing, beside the hand-
// outs themselves. Hand-outs do not wait for it: the ledger checks each
// one itself; a refresh only shows the front ends who holds what.
const ledgerRefreshGap = 100 * time.Millisecond

// throttle lets a signal through at once when the last went through gap
// ago or more, and otherwise once, gap after the last.
type throttle struct {
	gap     time.Duration
	last    time.Time
	timer   *time.Timer
	pending bool
}

func newThrottle(gap time.Duration) *throttle {
	t := &throttle{gap: gap, timer: time.NewTimer(gap)}
	t.timer.Stop()
	return t
}

// now reports whether a signal goes through now; if not, due fires when
// it may.
func (t *throttle) now() bool {
	if t.pending {
		return false
	}
	wait := t.gap - time.Since(t.last)
	if wait <= 0 {
		t.last = time.Now()
		return true
	}
	t.pending = true
	t.timer.Reset(wait)
	return false
}

// due fires when a held signal may go through; call fired then.
func (t *throttle) due() <-chan time.Time { return t.timer.C }

func (t *throttle) fired() {
	t.pending, t.last = false, time.Now()
}

func (t *throttle) stop() { t.timer.Stop() }
