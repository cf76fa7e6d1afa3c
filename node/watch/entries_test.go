package watch

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestWatchAll: each directory's entries are reported to the one channel,
// only the matching ones, and the watches end together with ctx.
func TestWatchAll(t *testing.T) {
	a, b := t.TempDir(), filepath.Join(t.TempDir(), "not-yet")
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan SocketEvent, 1)
	own := func(name string) bool { return name == "own.conf" }
	ended, err := WatchAll(ctx, []Entries{{Dir: a}, {Dir: b, Match: own}}, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := func(what string) SocketEvent {
		t.Helper()
		select {
		case ev := <-out:
			return ev
		case <-time.After(eventTimeout):
			t.Fatalf("no event for %s", what)
			return SocketEvent{}
		}
	}
	if err := os.WriteFile(filepath.Join(a, "x.conf"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if ev := next("a file in the first directory"); ev.Name != "x.conf" {
		t.Errorf("event %+v, want x.conf created", ev)
	}
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"other.conf", "own.conf"} {
		if err := os.WriteFile(filepath.Join(b, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ev := next("own.conf in the second directory, made after the watch"); ev.Name != "own.conf" {
		t.Errorf("event %+v, want own.conf created (other.conf does not match)", ev)
	}
	cancel()
	select {
	case <-ended:
	case <-time.After(eventTimeout):
		t.Fatal("the watches did not end with their context")
	}
}
