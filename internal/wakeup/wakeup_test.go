package wakeup

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestSignal(t *testing.T) {
	tests := []struct {
		name string
		do   func(s *Signal)
		want bool // a signal waits on C
	}{
		{"nothing sent", func(*Signal) {}, false},
		{"sent", func(s *Signal) { s.Send() }, true},
		{"sent twice, one slot", func(s *Signal) { s.Send(); s.Send(); <-s.C() }, false},
		{"sent while held", func(s *Signal) { s.Hold(); s.Send() }, false},
		{"sent after release", func(s *Signal) { s.Hold(); s.Send(); s.Release(); s.Send() }, true},
		{"held after a send keeps it", func(s *Signal) { s.Send(); s.Hold() }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			tt.do(s)
			select {
			case <-s.C():
				if !tt.want {
					t.Fatal("a signal waits; want none")
				}
			default:
				if tt.want {
					t.Fatal("no signal waits; want one")
				}
			}
		})
	}
}

// TestSignalNoChangeLost: senders change a value and Send, in random
// interleavings with a receiver that holds the signal while its look is
// scheduled and releases it before the look reads: every round's last
// change is seen, however many Sends were dropped.
func TestSignalNoChangeLost(t *testing.T) {
	s := New()
	var value, seen atomic.Int64
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	go receive(ctx, s, &value, &seen)
	const rounds, senders, sends = 200, 4, 50
	for round := range rounds {
		var wg sync.WaitGroup
		for range senders {
			wg.Go(func() {
				for range sends {
					value.Add(1)
					s.Send()
					if rand.IntN(4) == 0 {
						runtime.Gosched()
					}
				}
			})
		}
		wg.Wait()
		want := int64((round + 1) * senders * sends)
		for seen.Load() != want {
			if ctx.Err() != nil {
				t.Fatalf("round %d: the receiver saw %d, want %d: a change was lost", round, seen.Load(), want)
			}
			runtime.Gosched()
		}
	}
}

// receive is a receiver as the agent's are: a Send schedules a look and
// holds the signal; the look releases it, then reads.
func receive(ctx context.Context, s *Signal, value, seen *atomic.Int64) {
	look := make(chan struct{}, 1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.C():
			select {
			case look <- struct{}{}:
			default:
			}
			s.Hold()
		case <-look:
			s.Release()
			seen.Store(value.Load())
		}
	}
}
