package delegate

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/attachments"
)

// leaseHolders lists the containers holding a host-local lease of the
// default network inside the node.
func leaseHolders(t *testing.T, n *testNode) []string {
	t.Helper()
	var holders []string
	err := n.node.Run(context.Background(), func() error {
		dir := filepath.Join(n.ipamDir(), "podnet")
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err == nil && strings.Count(e.Name(), ".") == 3 {
				holders = append(holders, strings.Fields(string(data))[0])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(holders)
	return holders
}

// TestCNI1_1_GC_ReconcileCollectsWhatTheRuntimeForgot: a sandbox the
// runtime no longer has (it dropped it after a failed DEL, and containerd
// never calls GC) is torn down by the agent's reconcile from its record:
// its interface, its IP lease and the record go; a live sandbox and one
// whose ADD has only just finished are kept (issue 12 item 3).
func TestCNI1_1_GC_ReconcileCollectsWhatTheRuntimeForgot(t *testing.T) {
	n := newTestNode(t, "reconcile")
	ctx := context.Background()
	for _, name := range []string{"stale", "live"} {
		pod := n.createPod(name, "", nil)
		waitPod(t, n, podNS, name)
		netns := n.podNetns("hwnet-rec-" + name)
		if _, err := n.call(ctx, "ADD", name+"-sandbox", netns, pod); err != nil {
			t.Fatalf("ADD %s: %v", name, err)
		}
	}
	if got := leaseHolders(t, n); !slices.Equal(got, []string{"live-sandbox", "stale-sandbox"}) {
		t.Fatalf("leases held by %v before reconcile", got)
	}
	live := map[string]bool{"live-sandbox": true}
	reconcile := func(grace time.Duration) []string {
		var collected []string
		err := n.node.Run(ctx, func() error {
			var err error
			collected, err = n.d.Reconcile(ctx, n.conf, n.bin, live, grace)
			return err
		})
		if err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		return collected
	}
	if got := reconcile(time.Hour); len(got) != 0 {
		t.Fatalf("reconcile with a record younger than its grace tore down %v", got)
	}
	if got := reconcile(0); !slices.Equal(got, []string{"stale-sandbox"}) {
		t.Fatalf("reconcile tore down %v, want the stale sandbox only", got)
	}
	if got := leaseHolders(t, n); !slices.Equal(got, []string{"live-sandbox"}) {
		t.Errorf("leases held by %v after reconcile, want the live sandbox's only", got)
	}
	if _, ok := linksIn(t, "/var/run/netns/hwnet-rec-stale")["eth0"]; ok {
		t.Error("the stale sandbox's eth0 is still there")
	}
	if _, ok := linksIn(t, "/var/run/netns/hwnet-rec-live")["eth0"]; !ok {
		t.Error("the live sandbox lost its eth0")
	}
	if ids, _ := attachments.NewStore(filepath.Join(n.dir, "cache")).List(); !slices.Equal(ids, []string{"live-sandbox"}) {
		t.Errorf("records %v after reconcile, want the live sandbox's only", ids)
	}
}
