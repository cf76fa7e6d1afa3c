package daemon

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// TestResets: the ledger's source of pending resets, as the agent wires
// it, performs what it can at each read and withholds the rest: without
// a VF admin nothing is reset and the VF stays withheld, saying why; with
// one the reset puts back what the VF had and the VF is free.
func TestResets(t *testing.T) {
	o := Options{CacheDir: t.TempDir()}
	vlan, prior := 100, 42
	p := &vfreset.Pending{Record: vfsettings.Record{PF: "enp59s0f0", Index: 1, PCIAddress: "0000:3b:01.1",
		Settings: vfsettings.Settings{VLAN: &vlan}, Prior: &vfsettings.Settings{VLAN: &prior}}, Reason: "test", Since: time.Now()}
	if err := vfreset.Leave(vfreset.Dir(o.CacheDir), p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := o.Resets(nil, nil)(ctx)
	if err != nil || len(got) != 1 || got[0].Device != "0000:3b:01.1" || !strings.Contains(got[0].Reason, "sets no VF settings (--vf-admin)") {
		t.Fatalf("without a VF admin: %+v (%v), want the VF withheld, saying why", got, err)
	}
	rec := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	if got, err := o.Resets(rec, nil)(ctx); err != nil || len(got) != 0 {
		t.Fatalf("with one: %+v (%v), want the reset done", got, err)
	}
	if ops := vfrecord.Ops(t, rec, "0000:3b:01.1"); len(ops) != 1 || ops[0] != "vlan 42 qos 0 proto 802.1Q" {
		t.Errorf("reset calls %q, want the VLAN the VF had", ops)
	}
}
