package vflayout_test

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/vflayout"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/logtest"
)

// deadAgentsFence is what an agent that died half way through dpdkLayout
// left, its fence recording before: the fence on disk, in fenceDir. The
// returned node's Book is the next agent's, loaded from that directory.
func deadAgentsFence(t *testing.T, n *virtualnode.Node, before []fenceapi.VF) *bookNode {
	t.Helper()
	return deadAgentsFenceWith(t, n, &fenceapi.LayoutChange{Name: "dpdk", Before: before,
		Target: fenceapi.Layout{NumVFs: 4, Drivers: map[int]string{0: "vfio-pci", 1: "vfio-pci"}}})
}

// deadAgentsFenceWith is deadAgentsFence of the change given.
func deadAgentsFenceWith(t *testing.T, n *virtualnode.Node, change *fenceapi.LayoutChange) *bookNode {
	t.Helper()
	fenceDir := t.TempDir()
	dead := newBookNode(t, n, fenceDir)
	dead.serveKubelet(t)
	if err := dead.book.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	f := ledger.Fence{Key: vflayout.FenceKeyPrefix + pf, PF: pf, Reason: "its PF's VF layout dpdk is being applied", Layout: change}
	if err := dead.book.Fence(t.Context(), f, true); err != nil {
		t.Fatal(err)
	}
	next := newBookNode(t, n, fenceDir)
	next.serveKubelet(t)
	if err := next.book.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, ok := next.layoutFence(); !ok {
		t.Fatalf("the next Book does not have the dead agent's fence: %+v", next.book.Snapshot().Fences())
	}
	return next
}

// reserve hands dev to a new pod through the Book.
func reserve(t *testing.T, b *bookNode, dev string) error {
	t.Helper()
	return b.book.Reserve(t.Context(), ledger.Request{Devices: []string{dev},
		Holder: ledger.Holder{Kind: ledger.Pod, Resource: "intel.com/x", Namespace: "default", Name: "new", Container: "c"}})
}

// refusedAsFenced checks that no hand-out of the PF or a VF of it
// succeeds.
func refusedAsFenced(t *testing.T, b *bookNode) {
	t.Helper()
	for _, dev := range []string{pf, vf2} {
		err := reserve(t, b, dev)
		if c, ok := errors.AsType[*ledger.Conflict](err); !ok || c.Reason != ledger.Fenced ||
			!strings.Contains(err.Error(), "is fenced: its PF's VF layout dpdk is being applied") {
			t.Errorf("Reserve of %s while the PF is fenced: %v, want it refused as fenced", dev, err)
		}
	}
}

// TestManagerAfterADeadAgent: an agent that died during a change, after
// its first write (the PF at 0 VFs) or after its last, leaves the PF
// fenced for the next one, whose Book refuses every hand-out of the PF
// and its VFs. The next manager finishes the change if the layout is
// still declared, puts the PF back exactly as it was before the change if
// it is not, or if finishing fails, and lifts the fence once sysfs shows
// it; the VFs can be handed out again.
func TestManagerAfterADeadAgent(t *testing.T) {
	failing := []pools.PFLayout{{PF: pf, PFName: "enp59s0f0", TotalVFs: 256, Layout: &pools.VFLayout{Name: "dpdk", NumVFs: 4,
		Drivers: []pools.VFDriver{{VFs: []pools.IndexRange{{First: 0, Last: 0}}, Driver: "no-such-driver"}}}}}
	firstWrite := func(t *testing.T, n *virtualnode.Node, _ vflayout.Sysfs) error {
		return n.SetNumVFs(t.Context(), pf, 0)
	}
	lastWrite := func(t *testing.T, _ *virtualnode.Node, sys vflayout.Sysfs) error {
		_, err := sys.Apply(t.Context(), pf, vflayout.WantOf(dpdkLayout[0].Layout), vflayout.Before{})
		return err
	}
	for _, tc := range []struct {
		name     string
		diedAt   func(*testing.T, *virtualnode.Node, vflayout.Sysfs) error
		layouts  []pools.PFLayout
		finished bool
	}{
		{"the layout still declared: finished", firstWrite, dpdkLayout, true},
		{"the change done, its fence not lifted: lifted", lastWrite, dpdkLayout, true},
		{"no layout declared: undone", firstWrite, nil, false},
		{"the layout still declared, failing: back to before the dead agent's change", firstWrite, failing, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, sys := newNode(t)
			before := bindings(t, sys)
			b := deadAgentsFence(t, n, before)
			if err := tc.diedAt(t, n, sys); err != nil {
				t.Fatal(err)
			}
			refusedAsFenced(t, b)

			b.start(t, sys, vflayout.Options{Log: slog.New(slog.DiscardHandler)}, tc.layouts)
			waitFor(t, "the change finished or undone, and the fence lifted", func() bool {
				_, fenced := b.layoutFence()
				st, err := sys.Read(pf)
				done := err == nil && slices.Equal(st.Bindings(), before)
				if tc.finished {
					done = err == nil && equal(drivers(n), dpdkDrivers)
				}
				return done && !fenced && len(b.fenceFiles(t)) == 0
			})
			if err := reserve(t, b, vf2); err != nil {
				t.Errorf("Reserve of a VF once the fence is lifted: %v", err)
			}
		})
	}
}

// TestManagerKeepsAFenceItCannotLift: a dead agent's change that cannot
// be undone (VF 0's driver before cannot bind) keeps the fence, on disk
// too, so the PF's VFs stay withdrawn, and says so in a VFLayoutFailed
// Event.
func TestManagerKeepsAFenceItCannotLift(t *testing.T) {
	api := kubeapi.Start(t)
	n, sys := newNode(t)
	sys.Settle = 200 * time.Millisecond
	before := bindings(t, sys)
	before[0] = fenceapi.VF{Driver: "no/driver"}
	b := deadAgentsFence(t, n, before)
	logs := &logtest.Buffer{}
	b.start(t, sys, vflayout.Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Events: events.Start(t.Context(), api.Client(), "node-1")}, nil)

	kubeapi.WaitNodeEvent(t, api.Client(), "node-1", events.ReasonVFLayoutFailed,
		"VF layout dpdk of PF 0000:3b:00.0 not applied: an earlier agent stopped half way through the change and no layout is declared for the PF now; "+
			"putting its VFs back failed, they stay withdrawn: ")
	if !logs.Contains(`msg="VF layout: the change an earlier agent left cannot be undone; the PF stays fenced, its VFs withdrawn" pf=0000:3b:00.0 layout=dpdk err=`) {
		t.Errorf("no log of the fence kept:\n%s", logs.String())
	}
	if _, ok := b.layoutFence(); !ok || len(b.fenceFiles(t)) != 1 {
		t.Errorf("the fence was lifted (in force %t, files %q) with the PF not as it was", ok, b.fenceFiles(t))
	}
	refusedAsFenced(t, b)
}
