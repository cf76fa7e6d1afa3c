// Package wakeup signals a goroutine that something it looks at changed,
// without waking it when it already has a look scheduled. The agent's
// consumers of the device ledger's changes look at most every 50-100 ms,
// while a burst of prepares changed the ledger several times a call: on
// two vCPUs, each wake-up of a goroutine that then found nothing to do
// was a thread woken on the other CPU, and without those wake-ups a
// one-device NodePrepareResources took 0.5-0.8 ms less
// (docs/performance.md, twenty-seventh round).
package wakeup

import "sync/atomic"

// Signal is a one-slot signal its receiver can hold while a look is
// scheduled: a Send meanwhile is dropped. The receiver Releases before
// the look reads what it looks at, so a change made before a dropped
// Send is seen: atomics and locks are sequentially consistent in Go, and
// the Send saw the hold before the Release. The zero Signal is not
// usable; make one with New.
type Signal struct {
	c    chan struct{}
	held atomic.Bool
}

// New is a Signal nothing has sent or held.
func New() *Signal { return &Signal{c: make(chan struct{}, 1)} }

// Send tells the receiver something changed, unless it holds the
// signal. It never blocks.
func (s *Signal) Send() {
	if s.held.Load() {
		return
	}
	select {
	case s.c <- struct{}{}:
	default:
	}
}

// C is the channel the receiver waits on.
func (s *Signal) C() <-chan struct{} { return s.c }

// Hold says a look is scheduled: Sends are dropped until Release.
func (s *Signal) Hold() { s.held.Store(true) }

// Release lets Sends through again; the receiver calls it before its
// scheduled look reads anything.
func (s *Signal) Release() { s.held.Store(false) }
