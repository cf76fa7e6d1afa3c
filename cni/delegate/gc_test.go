package delegate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
)

// GC (CNI 1.1) deletes the attachments of containers the runtime no longer
// lists and keeps the others; STATUS asks every network in use.
func TestSpecCNI11_GCAndStatus(t *testing.T) {
	n := newHarness(t)
	state := t.TempDir()
	def := filepath.Join(n.dir, "net.d", "10-podnet.conflist")
	writeFile(t, def, `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","stateDir":"`+state+`"}]}`)
	conf, _ := json.Marshal(pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet",
		CacheDir: filepath.Join(n.dir, "cache"), DefaultNetwork: def})
	n.conf = conf
	ctx := context.Background()
	for _, id := range []string{"kept", "stale"} {
		if _, err := n.d.Handle(ctx, n.request("ADD", id, nil)); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
	}
	if _, err := n.d.Handle(ctx, n.request("STATUS", "", nil)); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	gc := n.request("GC", "", nil)
	gc.Config, _ = json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "hwnet", "type": "hwnet",
		"cacheDir": filepath.Join(n.dir, "cache"), "defaultNetwork": def,
		"cni.dev/valid-attachments": []map[string]string{{"containerID": "kept", "ifname": "eth0"}}})
	if _, err := n.d.Handle(ctx, gc); err != nil {
		t.Fatalf("GC: %v", err)
	}
	ids, _ := attachments.NewStore(filepath.Join(n.dir, "cache")).List()
	if len(ids) != 1 || ids[0] != "kept" {
		t.Fatalf("records after GC = %v, want only kept", ids)
	}
	entries, _ := os.ReadDir(state)
	if len(entries) != 1 || entries[0].Name() != "kept-eth0" {
		t.Fatalf("plugin state after GC = %v, want only kept-eth0", entries)
	}
}
