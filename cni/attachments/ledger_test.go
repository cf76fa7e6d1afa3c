package attachments_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// TestLedgerReadsRecords: the device ledger reads the store's records: a
// container holds the devices its attachments name, from the time its
// record was written, until the record is removed.
func TestLedgerReadsRecords(t *testing.T) {
	store := attachments.NewStore(t.TempDir())
	rec := &attachmentapi.Record{ContainerID: "c0ffee", PodNamespace: "ns", PodName: "cnf", PodUID: "uid-1",
		Attachments: []attachmentapi.Attachment{
			{Network: "ns/sriov", IfName: "net1", DeviceID: "0000:3b:02.0", Resource: "intel.com/vf", ConfList: []byte(`{}`)},
			{Network: "ns/bridge", IfName: "net2", ConfList: []byte(`{}`)},
		}}
	if err := store.Save(rec); err != nil {
		t.Fatal(err)
	}
	r := ledger.NewReader(ledger.Sources{Records: store})
	l := r.Read(context.Background())
	hs := l.Holders("0000:3b:02.0")
	if !l.Complete() || len(hs) != 1 || hs[0].Kind != ledger.Container || hs[0].Container != "c0ffee" ||
		hs[0].Name != "cnf" || hs[0].PodUIDs[0] != "uid-1" || hs[0].Since.IsZero() {
		t.Fatalf("holders %+v (unknown %v), want container c0ffee of pod ns/cnf with a time", hs, l.Unknown)
	}
	if devs := l.Devices(); len(devs) != 1 {
		t.Errorf("held devices %v, want only the VF: the bridge attachment holds no device", devs)
	}
	if err := store.Remove("c0ffee"); err != nil {
		t.Fatal(err)
	}
	if hs := r.Read(context.Background()).Holders("0000:3b:02.0"); len(hs) != 0 {
		t.Errorf("holders after the record's removal %+v, want none", hs)
	}
}

// BenchmarkLedgerRead is one read of the agent's device ledger on a full
// node, as the agent makes one every --ledger-interval: 110 pods holding a
// VF each through the device plugin, whose 110 sandboxes have a record
// each, and a DRA checkpoint of 16 claims; nothing changed since the read
// before, so records and checkpoint are only stat'ed.
func BenchmarkLedgerRead(b *testing.B) {
	dir := b.TempDir()
	kubelet, err := testkubelet.ServePodResources(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		b.Fatal(err)
	}
	defer kubelet.Close()
	store := attachments.NewStore(filepath.Join(dir, "cache"))
	for i := range 110 {
		vf := fmt.Sprintf("0000:3b:%02x.%d", 2+i/8, i%8)
		kubelet.SetPod("ns", fmt.Sprintf("pod-%d", i), "intel.com/vf", vf)
		rec := &attachmentapi.Record{ContainerID: fmt.Sprintf("sandbox%04d", i), PodNamespace: "ns", PodName: fmt.Sprintf("pod-%d", i),
			Attachments: []attachmentapi.Attachment{{Network: "ns/sriov", IfName: "net1", DeviceID: vf, ConfList: []byte(`{}`)}}}
		if err := store.Save(rec); err != nil {
			b.Fatal(err)
		}
	}
	cp := checkpoint.New()
	for i := range 16 {
		cp.Claims[types.UID(fmt.Sprint("uid-", i))] = &checkpoint.Claim{Namespace: "ns", Name: fmt.Sprint("claim-", i),
			Devices: []checkpoint.Device{{PCIAddress: fmt.Sprintf("0000:5e:02.%d", i%8)}}}
	}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "checkpoint.json"), data, 0o600); err != nil {
		b.Fatal(err)
	}
	r := ledger.NewReader(ledger.Sources{PodResourcesSocket: filepath.Join(dir, "kubelet.sock"), DevinfoDir: filepath.Join(dir, "devinfo"),
		Checkpoint: filepath.Join(dir, "checkpoint.json"), Records: store})
	defer r.Close()
	ctx := context.Background()
	if l := r.Read(ctx); !l.Complete() || len(l.Devices()) != 118 {
		b.Fatalf("ledger: unknown %v, %d devices held, want 118", l.Unknown, len(l.Devices()))
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Read(ctx)
	}
}
