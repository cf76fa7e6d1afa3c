package ledger_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// owedSource is the agent's source of pending resets (cni/daemon's
// Options.Resets): each read performs them first.
func owedSource(o *vfadmin.Owed) func(context.Context) ([]ledger.Withheld, error) {
	return func(ctx context.Context) ([]ledger.Withheld, error) {
		left, err := o.Settle(ctx)
		if err != nil {
			return nil, err
		}
		var out []ledger.Withheld
		for _, l := range left {
			out = append(out, ledger.WithheldFor(l.Pending, l.Err))
		}
		return out, nil
	}
}

// TestPendingResetWithholds (issue 42): a VF whose settings reset the
// shim left pending (the agent was away at the pod's DEL) is performed as
// the Book loads, before any front end serves; while it cannot be done
// (the VF's netdev is not back yet) the VF is withheld from every
// Reserve, as a fence that says why, and retried at each poll; once done
// it is handed out again, with what it had before. A pending reset that
// cannot be read makes every device unknown.
func TestPendingResetWithholds(t *testing.T) {
	sysfs := sysfsWithVFs(t)
	devices := filepath.Join(sysfs, "bus/pci/devices")
	if err := os.MkdirAll(filepath.Join(devices, pfA, "net", "ens1f0"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	rec.SysfsRoot = sysfs
	dir := filepath.Join(t.TempDir(), vfreset.SubDir)
	vlan, mtu, prior, priorMTU := 100, 9000, 42, 1500
	if err := vfreset.Leave(dir, &vfreset.Pending{Reason: "container c1 of pod ns/p deleted by the shim while hwnet-agent was away",
		Since: time.Now(), Record: vfsettings.Record{PF: "ens1f0", PFPCIAddress: pfA, Index: 0, PCIAddress: vfA0,
			Settings: vfsettings.Settings{VLAN: &vlan, MTU: &mtu}, Prior: &vfsettings.Settings{VLAN: &prior, MTU: &priorMTU}}}); err != nil {
		t.Fatal(err)
	}
	b := openBook(t, ledger.BookOptions{SysfsRoot: sysfs, Sources: ledger.Sources{Resets: owedSource(&vfadmin.Owed{Dir: dir, Admin: rec})}})
	ctx := context.Background()
	err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimD})
	if err == nil || !strings.Contains(err.Error(), "device "+vfA0+" is fenced: its VF settings reset is pending since") ||
		!strings.Contains(err.Error(), "not back yet") {
		t.Fatalf("Reserve of a VF whose reset is pending: %v, want it refused saying why", err)
	}
	if f, ok := b.Snapshot().Fenced(vfA0, pfA); !ok || !strings.HasPrefix(f.Key, ledger.ResetKeyPrefix) {
		t.Errorf("snapshot: %+v %v, want the VF withheld by its reset", f, ok)
	}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA1}, Holder: claimD}); err != nil {
		t.Errorf("Reserve of another VF: %v", err)
	}
	wctx := watchBook(t, b)
	if err := os.MkdirAll(filepath.Join(devices, vfA0, "net", "eth0"), 0o755); err != nil { // the netdev is back
		t.Fatal(err)
	}
	waitSnapshot(wctx, t, b, "the reset done", func(l *ledger.Ledger) bool { _, fenced := l.Fenced(vfA0, pfA); return !fenced })
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{vfA0}, Holder: claimD}); err != nil {
		t.Errorf("Reserve after the reset: %v", err)
	}
	if got := vfrecord.Ops(t, rec, vfA0); !slices.Contains(got, "vlan 42 qos 0 proto 802.1Q") || !slices.Contains(got, "mtu 1500") {
		t.Errorf("reset calls %q, want the VF's own VLAN and MTU back", got)
	}
	if err := os.WriteFile(filepath.Join(dir, vfB0+".json"), []byte(`{"version":1,"reset":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if l := b.Refresh(ctx); l.Complete() {
		t.Errorf("a torn pending reset: the ledger is complete, want every device unknown")
	}
}
