package attachments

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/api/attachment"
)

func TestRecordRoundTrip(t *testing.T) {
	s := NewStore(t.TempDir())
	if _, err := s.Load("c1"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Load of an unknown container: %v, want ErrNotExist", err)
	}
	rec := &attachment.Record{ContainerID: "c1", Netns: "/run/netns/x", PodNamespace: "ns", PodName: "p", PodUID: "u",
		Attachments: []attachment.Attachment{{Network: "ns/a", IfName: "net1", ConfList: []byte(`{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"x"}]}`),
			Args: [][2]string{{"K8S_POD_NAME", "p"}}, DeviceID: "0000:3b:01.0", Resource: "intel.com/a"}}}
	if err := s.Save(rec); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("c1")
	if err != nil || got.Attachments[0].DeviceID != "0000:3b:01.0" || got.Netns != rec.Netns {
		t.Fatalf("Load = %+v, %v", got, err)
	}
	if ids, _ := s.List(); !slices.Equal(ids, []string{"c1"}) {
		t.Fatalf("List = %v", ids)
	}
	rt := Runtime(got, got.Attachments[0])
	if rt.ContainerID != "c1" || rt.IfName != "net1" || rt.Netns != "/run/netns/x" {
		t.Errorf("Runtime = %+v", rt)
	}
	for range 2 { // DEL may run twice
		if err := s.Remove("c1"); err != nil {
			t.Fatal(err)
		}
	}
	if ids, _ := s.List(); len(ids) != 0 {
		t.Fatalf("List after Remove = %v", ids)
	}
}

func TestValidateContainerID(t *testing.T) {
	for _, id := range []string{"", ".", "..", "../etc", "a/b", "a\x00b"} {
		if err := ValidateContainerID(id); err == nil {
			t.Errorf("ValidateContainerID(%q) accepted an ID that escapes the store", id)
		}
		if _, err := NewStore(t.TempDir()).Lock(context.Background(), id); err == nil {
			t.Errorf("Lock(%q) accepted", id)
		}
	}
	if err := ValidateContainerID("3f2a9c1b"); err != nil {
		t.Error(err)
	}
}

// Operations on one container are serialised (NPWG 7.3); the locks leave
// no file per container behind.
func TestSpec7_3_LockSerialisesOneContainer(t *testing.T) {
	dir := t.TempDir()
	s := NewStore(dir)
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				unlock, err := s.Lock(context.Background(), "c1")
				if err != nil {
					t.Error(err)
					return
				}
				if n := inside.Add(1); n > most.Load() {
					most.Store(n)
				}
				time.Sleep(50 * time.Microsecond)
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Fatalf("%d holders of one container's lock at once", most.Load())
	}
	for i := range 100 {
		unlock, err := s.Lock(context.Background(), fmt.Sprintf("container-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		unlock()
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 || entries[0].Name() != "containers.lock" {
		t.Errorf("store directory holds %v after locking 101 containers, want the one shared lock file", entries)
	}
}

func TestLockWaitEndsWithContext(t *testing.T) {
	s := NewStore(t.TempDir())
	unlock, err := s.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	other, err := s.Lock(context.Background(), "c2")
	if err != nil {
		t.Fatalf("another container's lock must not wait: %v", err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := s.Lock(ctx, "c1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held container = %v, want the context's deadline", err)
	}
}

// LockAll waits for every container's lock and holds them all; neither it
// nor LockIfExists makes the store's directory, as Lock does.
func TestLockAll(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cni")
	s := NewStore(dir)
	if _, err := s.LockAll(context.Background()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LockAll without the directory = %v, want ErrNotExist", err)
	}
	if _, err := s.LockIfExists(context.Background(), "c1"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LockIfExists without the directory = %v, want ErrNotExist", err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the store's directory was made: %v", err)
	}
	unlock, err := s.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	if err := lockTimesOut(func(ctx context.Context) (func(), error) { return s.LockAll(ctx) }); err != nil {
		t.Errorf("LockAll while a container's lock is held: %v", err)
	}
	unlock()
	all, err := s.LockAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer all()
	for _, id := range []string{"c1", "c2", strings.Repeat("f", 64)} {
		if err := lockTimesOut(func(ctx context.Context) (func(), error) { return s.LockIfExists(ctx, id) }); err != nil {
			t.Errorf("container %s while every lock is held: %v", id, err)
		}
	}
}

// lockTimesOut reports an error unless lock waits until its context ends.
func lockTimesOut(lock func(context.Context) (func(), error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	unlock, err := lock(ctx)
	if err == nil {
		unlock()
		return errors.New("taken, want a wait until the context's deadline")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w, want the context's deadline", err)
	}
	return nil
}

// The ADD's results, appended after the ADDs, come back with the record
// for DEL and CHECK; a results line a crash cut short, or one that does
// not fit the record, is dropped and the record still loads.
func TestAppendResults(t *testing.T) {
	res0, res1 := `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}`, `{"cniVersion":"1.0.0","interfaces":[{"name":"net1"}]}`
	tests := []struct {
		name  string
		after func(t *testing.T, path string) // damages the file
		want  []string
	}{
		{"results kept", nil, []string{res0, res1}},
		{"crash mid-append", func(t *testing.T, path string) { truncateBy(t, path, 10) }, []string{"", ""}},
		{"no results line", func(t *testing.T, path string) { truncateBy(t, path, len(res0)+len(res1)+5) }, []string{"", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewStore(t.TempDir())
			rec := &attachment.Record{ContainerID: "c1", Netns: "/n", Attachments: []attachment.Attachment{
				{Network: "podnet", IfName: "eth0", ConfList: []byte(`{}`)},
				{Network: "ns/a", IfName: "net1", ConfList: []byte(`{}`)}}}
			if err := s.Save(rec); err != nil {
				t.Fatal(err)
			}
			rec.Attachments[0].Result, rec.Attachments[1].Result = []byte(res0), []byte(res1)
			if err := s.AppendResults(rec); err != nil {
				t.Fatal(err)
			}
			if tt.after != nil {
				tt.after(t, s.recordPath("c1"))
			}
			got, err := s.Load("c1")
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			for i, a := range got.Attachments {
				if string(a.Result) != tt.want[i] {
					t.Errorf("attachment %d result %s, want %q", i, a.Result, tt.want[i])
				}
			}
		})
	}
}

func truncateBy(t *testing.T, path string, n int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-int64(n)); err != nil {
		t.Fatal(err)
	}
}

// TestRecordVersion: records say their format (package api/attachment
// tests each version); the store reads a newer one for its teardown
// rather than refuse it, and marks only a garbled one unreadable.
func TestRecordVersion(t *testing.T) {
	s := NewStore(t.TempDir())
	if err := s.Save(&attachment.Record{ContainerID: "c1"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(s.recordPath("c1")); !strings.Contains(string(data), fmt.Sprintf(`"version":%d`, attachment.Version)) {
		t.Errorf("saved record %s has no version", data)
	}
	for _, tc := range []struct {
		name, text string
		unreadable bool
		skipped    string
	}{
		{"unversioned", `{"containerID":"c2","attachments":[{"network":"ns/a","ifName":"net1","confList":{}}]}`, false, ""},
		{"newer", fmt.Sprintf(`{"version":%d,"containerID":"c2","attachments":[{"network":"ns/a","ifName":"net1","confList":{}}]}`,
			attachment.Version+1), false, "format version"},
		{"another container's", `{"containerID":"c3","attachments":[{"network":"ns/a","ifName":"net1","confList":{}}]}`, false, `container ID "c3"`},
		{"garbled", `{"containerID":"c2","attach`, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(s.recordPath("c2"), []byte(tc.text+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			rec, err := s.Load("c2")
			if tc.unreadable {
				if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), s.recordPath("c2")) {
					t.Errorf("Load: %v, want ErrUnreadable naming the file", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if rec.ContainerID != "c2" || len(rec.Attachments) != 1 || !strings.Contains(strings.Join(rec.Skipped, "; "), tc.skipped) {
				t.Errorf("Load = %+v", rec)
			}
		})
	}
}

// TestChangedMovesUntilSettled: the records' Changed time moves at every
// ask while the directory's time is within a tick's reach of now (a
// second save in the same tick may keep it: here, the time set back to
// the first save's, ahead of the clock so that no stall of the machine
// settles it), and is the directory's time once settled.
func TestChangedMovesUntilSettled(t *testing.T) {
	s := NewStore(t.TempDir())
	if c, err := s.Changed(); err != nil || !c.IsZero() {
		t.Fatalf("no record yet: Changed %v, %v; want the zero time", c, err)
	}
	dir := filepath.Join(s.Dir(), "containers")
	saveAt := func(id string, at time.Time) {
		t.Helper()
		if err := s.Save(&attachment.Record{ContainerID: id, Netns: "/run/netns/" + id}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(dir, at, at); err != nil {
			t.Fatal(err)
		}
	}
	tick := time.Now().Add(time.Hour)
	saveAt("c1", tick)
	a, _ := s.Changed()
	saveAt("c2", tick)
	if b, _ := s.Changed(); b.Equal(a) || b.Equal(tick) {
		t.Fatalf("a second save within the tick: Changed %v, then %v; want it moved, not the directory's %v", a, b, tick)
	}
	settled := time.Now().Add(-time.Minute)
	if err := os.Chtimes(dir, settled, settled); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if c, _ := s.Changed(); !c.Equal(settled) {
			t.Fatalf("settled: Changed %v; want the directory's %v", c, settled)
		}
	}
}
