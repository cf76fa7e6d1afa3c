package ledger

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/watch"
)

// runWatch stands in for the collector's directory watch: the test sends
// its changes and ends it.
type runWatch struct {
	mu      sync.Mutex
	changed chan<- watch.SocketEvent
	ended   chan struct{}
	calls   atomic.Int32
	fail    atomic.Bool
}

func (w *runWatch) watch(_ context.Context, changed chan<- watch.SocketEvent) (<-chan struct{}, error) {
	w.calls.Add(1)
	if w.fail.Load() {
		return nil, errors.New("too many open files")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changed, w.ended = changed, make(chan struct{})
	return w.ended, nil
}

func (w *runWatch) change() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.changed <- watch.SocketEvent{}
}

func (w *runWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.ended)
}

// TestCollectorRunWakesOnChanges: Run collects at start, then only after
// a change (the watch's, Wake), at most once an interval, and every
// interval while a round left a file younger than the grace or no watch
// runs. An idle node's collector does not run: it woke the agent every
// 30 s to find what it found the last time. The bubble's clock moves only
// when every goroutine waits, so an hour passes at once and a round that
// should not run would be counted.
func TestCollectorRunWakesOnChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const res, dev, interval, grace = "intel.com/a", "0000:3b:02.1", 30 * time.Second, time.Minute
		dir := t.TempDir()
		ageDir(t, dir)
		var rounds, asks, alsoYoung atomic.Int32
		w := &runWatch{}
		c := &Collector{Dir: dir, Logger: slog.New(slog.DiscardHandler), Watch: w.watch, AskAgain: func() { asks.Add(1) },
			Also: func(*Ledger, time.Time) bool { return alsoYoung.Add(-1) >= 0 }}
		c.Add(res)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go c.Run(ctx, interval, grace, func() *Ledger { rounds.Add(1); return New(nil, nil) })
		file := filepath.Join(dir, devinfo.FileName(res, dev))
		expect := func(step string, wantRounds int32, wantFile bool) {
			t.Helper()
			synctest.Wait()
			if got := rounds.Load(); got != wantRounds {
				t.Fatalf("%s: %d rounds, want %d", step, got, wantRounds)
			}
			if _, err := os.Stat(file); (err == nil) != wantFile {
				t.Fatalf("%s: file there %t, want %t", step, err == nil, wantFile)
			}
		}
		idle := func(step string, wantRounds int32, wantFile bool) {
			t.Helper()
			time.Sleep(time.Hour)
			expect(step+", then an hour idle", wantRounds, wantFile)
		}

		expect("at start", 1, false)
		idle("at start", 1, false)

		writeAged(t, dir, res, dev, time.Now().Add(-2*grace))
		w.change()
		expect("a file nothing holds written", 2, false)
		ageDir(t, dir)
		idle("the file removed", 2, false)

		c.Wake()
		expect("a change of the ledger: a round at once", 3, false)
		c.Wake()
		c.Wake()
		expect("two more changes at once: not before an interval", 3, false)
		time.Sleep(interval)
		expect("the changes coalesced: one round an interval after", 4, false)
		idle("the changes looked at", 4, false)

		writeAged(t, dir, res, dev, time.Now())
		w.change()
		expect("a file younger than the grace", 5, true)
		if asks.Load() != 1 {
			t.Fatalf("a round that left a young file asked again %d times, want 1", asks.Load())
		}
		time.Sleep(interval)
		expect("the file still young", 6, true)
		time.Sleep(interval)
		expect("the file as old as the grace", 7, false)
		ageDir(t, dir)
		idle("the young file removed", 7, false)

		alsoYoung.Store(2)
		c.Wake()
		expect("Also left a spec for being young", 8, false)
		time.Sleep(2 * interval)
		expect("Also's spec young, then old enough", 10, false)
		idle("Also's spec looked at", 10, false)

		w.fail.Store(true)
		w.end()
		expect("the watch ended: a round at once, to watch again", 11, false)
		time.Sleep(2 * interval)
		expect("no watch: a round every interval", 13, false)
		w.fail.Store(false)
		time.Sleep(interval)
		expect("watched again", 14, false)
		idle("watched again", 14, false)
		if got := w.calls.Load(); got != 5 {
			t.Errorf("watch made %d times, want 5 (at start, then once a round until it could be)", got)
		}
	})
}

// writeAged writes a device-info file with its time at, and the
// directory's an hour before: the bubble's clock is not the file
// system's.
func writeAged(t *testing.T, dir, res, dev string, at time.Time) {
	t.Helper()
	write(t, dir, res, dev)
	if err := os.Chtimes(filepath.Join(dir, devinfo.FileName(res, dev)), at, at); err != nil {
		t.Fatal(err)
	}
	ageDir(t, dir)
}
