package cluster

import (
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func TestStopProcesses(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log")
	polite, err := startDetached("polite", []string{"sleep", "60"}, log)
	if err != nil {
		t.Fatal(err)
	}
	// A process that ignores SIGTERM is killed after the grace period.
	stubborn, err := startDetached("stubborn", []string{"sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"}, log)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let sh set its trap
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
