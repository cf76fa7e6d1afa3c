package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/vnodetest"
)

func TestStopProcesses(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	polite, err := startDetached("polite", []string{"sleep", "60"}, log)
	if err != nil {
		t.Fatal(err)
	}
	// A process that ignores SIGTERM is killed after the grace period. It
	// says when its trap is set, so the test stops it only after.
	trapped := filepath.Join(t.TempDir(), "trapped")
	stubborn, err := startDetached("stubborn", []string{"sh", "-c", "trap '' TERM; : > " + trapped + "; while :; do sleep 0.1; done"}, log)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(trapped); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stubborn process never set its trap")
		}
	}
	if !polite.running() || !stubborn.running() {
		t.Fatal("processes not running after start")
	}
	if err := stopProcesses(t.Context(), []*process{polite, stubborn}, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if polite.running() || stubborn.running() {
		t.Error("processes still running after stopProcesses")
	}
}

// TestRunningChecksStartTime: a PID now used by another process is not
// the recorded process.
func TestRunningChecksStartTime(t *testing.T) {
	p, err := startDetached("sleep", []string{"sleep", "60"}, filepath.Join(t.TempDir(), "log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stopProcesses(t.Context(), []*process{p}, time.Second)
	reused := *p
	reused.StartTime++
	if !p.running() || reused.running() {
		t.Errorf("running: recorded %v, with another start time %v; want true, false", p.running(), reused.running())
	}
}

func TestCgroupLevels(t *testing.T) {
	got := cgroupLevels("/hwnet-e2e/n/system")
	if want := []string{"/hwnet-e2e", "/hwnet-e2e/n", "/hwnet-e2e/n/system"}; !slices.Equal(got, want) {
		t.Errorf("cgroupLevels = %v, want %v", got, want)
	}
}

// TestHeldMountNamespaceKeepsItsNumber: once the last process in a mount
// namespace ends, the kernel gives its number to the next new one, in
// which Down would find strangers (another cluster's pause, as CI did).
// Held, the number stays the cluster's.
func TestHeldMountNamespaceKeepsItsNumber(t *testing.T) {
	vnodetest.RequireRoot(t)
	log := filepath.Join(t.TempDir(), "log")
	newNS := func() (*process, string) {
		p, err := startDetached("holder", []string{"unshare", "--mount", "--", "sleep", "60"}, log)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stopProcesses(context.Background(), []*process{p}, time.Second) })
		// unshare --mount keeps the network namespace this test is in.
		if err := waitInNamespaces(t.Context(), p, "/proc/self/ns/net"); err != nil {
			t.Fatal(err)
		}
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", p.PID))
		if err != nil {
			t.Fatal(err)
		}
		return p, ns
	}
	holder, ns := newNS()
	c := &Cluster{st: &state{Holder: holder, MountNS: ns, CgroupRoot: "hwnet-no-such-cgroup"}}
	held, release := c.holdMountNS()
	defer release()
	if held != ns {
		t.Fatalf("holdMountNS = %q, want %q", held, ns)
	}
	if err := stopProcesses(t.Context(), []*process{holder}, time.Second); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, other := newNS(); other == ns {
			t.Fatalf("a new mount namespace got the held one's number %s", ns)
		}
	}
	if members, err := mountNSMembers(held); err != nil || len(members) > 0 {
		t.Errorf("members of the held namespace after its holder ended: %v (%v)", members, err)
	}
}
