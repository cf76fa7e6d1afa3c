package attachments_test

import (
	"context"
	"testing"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/node/ledger"
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
