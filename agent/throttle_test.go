package agent

import (
	"testing"
	"time"
)

// TestThrottle: the first signal goes through at once; those within the
// gap after it are held as one, which goes through when due fires; a
// signal the gap after the last goes through at once again.
func TestThrottle(t *testing.T) {
	const gap = 20 * time.Millisecond
	th := newThrottle(gap)
	defer th.stop()
	if !th.now() {
		t.Fatal("the first signal was held")
	}
	for range 2 {
		if th.now() {
			t.Fatal("a signal within the gap went through")
		}
	}
	start := time.Now()
	select {
	case <-th.due():
	case <-time.After(10 * time.Second):
		t.Fatal("the held signal never came due")
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("held %v, want about %v", waited, gap)
	}
	th.fired()
	if th.now() {
		t.Error("a signal right after the held one went through")
	}
	<-th.due()
	th.fired()
	th.last = time.Now().Add(-gap)
	if !th.now() {
		t.Error("a signal the gap after the last was held")
	}
}
