package daemon

import (
	"testing"

	"github.com/hwnet-io/hwnet/test/testcri"
)

// TestRuntimeClientKeepsItsConnection: the runtime GC asks the runtime
// over one connection round after round, and after the runtime was down,
// the first ask once it is back answers (a connection kept through the
// failures would wait out gRPC's reconnect backoff).
func TestRuntimeClientKeepsItsConnection(t *testing.T) {
	cri := testcri.Start(t)
	cri.Set(testcri.Sandbox("s1", "ns", "a", "uid-a"))
	c := &runtimeClient{socket: cri.Socket}
	t.Cleanup(c.close)
	ask := func(when string) {
		t.Helper()
		a, err := c.sandboxes(t.Context())
		if err != nil || !a.sandboxes["s1"] || !a.pods[podKey{"ns", "a"}] {
			t.Fatalf("%s: sandboxes %v, pods %v, err %v; want s1 of ns/a", when, a.sandboxes, a.pods, err)
		}
	}
	for range 3 {
		ask("a running runtime")
	}
	if n := cri.Conns(); n != 1 {
		t.Fatalf("three asks took %d connections; want 1", n)
	}

	cri.Stop()
	for range 2 {
		if _, err := c.sandboxes(t.Context()); err == nil {
			t.Fatal("a runtime that is down answered")
		}
	}
	cri.Serve(t)
	ask("the runtime back")
}
