package ledger_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// TestFenceSeesHoldersOfTheFreshRead: a fence that wants its devices
// free, refused at first because kubelet could not be read, reads the
// sources again; a holder only that read finds refuses it.
func TestFenceSeesHoldersOfTheFreshRead(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "kubelet.sock")
	b := ledger.NewBook(ledger.BookOptions{Sources: ledger.Sources{PodResourcesSocket: socket}, FenceDir: t.TempDir()})
	b.Judge(ledger.Verdicts{})
	defer b.Close()
	if err := b.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if b.Snapshot().Complete() {
		t.Fatal("the ledger is complete without kubelet")
	}
	kubelet, err := testkubelet.ServePodResources(socket)
	if err != nil {
		t.Fatal(err)
	}
	defer kubelet.Close()
	kubelet.SetPod("default", "cnf", "intel.com/x", "0000:3b:02.0")

	err = b.Fence(t.Context(), ledger.Fence{Key: "test", Devices: []string{"0000:3b:02.0"}, Reason: "a test"}, true)
	if c, ok := errors.AsType[*ledger.Conflict](err); !ok || c.Reason != ledger.Held || c.Device != "0000:3b:02.0" {
		t.Fatalf("Fence of a device kubelet says a pod holds: %v, want it refused as held", err)
	}
}
