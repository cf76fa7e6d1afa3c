package delegate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
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

// TestSpecCNI11_GCKeepsABusyContainer: a GC, the runtime's (CNI 1.1) or
// the agent's reconcile, that runs while another operation holds a
// container (its ADD, with a slow plugin still running; a DEL or CHECK
// holding its lock) keeps what the container has attached, although the
// runtime does not list it: a network's GC told it is gone would free the
// address the ADD is about to return. Once the operation has ended and
// the runtime no longer has the container, the next GC frees it.
func TestSpecCNI11_GCKeepsABusyContainer(t *testing.T) {
	n := newHarness(t)
	state, release := t.TempDir(), filepath.Join(t.TempDir(), "release")
	def := filepath.Join(n.dir, "net.d", "10-slow.conflist")
	writeFile(t, def, `{"cniVersion":"1.1.0","name":"slow","plugins":[{"type":"hwnet-test-plugin","stateDir":"`+state+`"},
  {"type":"hwnet-test-plugin","waitFor":"`+release+`"}]}`)
	cache := filepath.Join(n.dir, "cache")
	n.conf, _ = json.Marshal(pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet", CacheDir: cache, DefaultNetwork: def})
	gcs := []struct {
		name string
		gc   func(ctx context.Context) error
	}{
		{"CNI GC", func(ctx context.Context) error {
			gc := n.request("GC", "", nil)
			gc.Config, _ = json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "hwnet", "type": "hwnet",
				"cacheDir": cache, "defaultNetwork": def, "cni.dev/valid-attachments": []any{}})
			_, err := n.d.Handle(ctx, gc)
			return err
		}},
		{"reconcile", func(ctx context.Context) error {
			_, err := n.d.Reconcile(ctx, n.conf, n.bin, nil, 0)
			return err
		}},
	}
	holds := []struct {
		name string
		// hold makes the container busy once its first plugin ran and
		// returns what ends the operation.
		hold func(t *testing.T, id string) (end func())
	}{
		{"slow ADD", func(t *testing.T, id string) func() {
			added := make(chan error, 1)
			go func() {
				_, err := n.d.Handle(t.Context(), n.request("ADD", id, nil))
				added <- err
			}()
			kubeapi.WaitFor(t, "the ADD's first plugin", func() bool { return exists(filepath.Join(state, id+"-eth0")) })
			return func() {
				writeFile(t, release, "")
				if err := <-added; err != nil {
					t.Fatalf("ADD: %v", err)
				}
			}
		}},
		{"locked", func(t *testing.T, id string) func() {
			writeFile(t, release, "")
			if _, err := n.d.Handle(t.Context(), n.request("ADD", id, nil)); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			unlock, err := attachments.NewStore(cache).Lock(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			return unlock
		}},
	}
	for _, h := range holds {
		for _, g := range gcs {
			t.Run(h.name+"/"+g.name, func(t *testing.T) {
				os.Remove(release)
				id := strings.ReplaceAll(h.name+"-"+g.name, " ", "-")
				lease := filepath.Join(state, id+"-eth0")
				end := h.hold(t, id)
				if err := g.gc(t.Context()); err != nil {
					t.Fatalf("GC while the container is busy: %v", err)
				}
				if !exists(lease) {
					t.Fatal("a GC while the container was busy freed what it had attached")
				}
				end()
				if err := g.gc(t.Context()); err != nil {
					t.Fatalf("GC once the container is free: %v", err)
				}
				if exists(lease) {
					t.Error("the GC after the container went left what it had attached")
				}
			})
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestSpecCNI11_GCCollectsAnUntrustedRecord: a container the runtime no
// longer has, whose record no DEL can run from as it stands (an empty
// plugin type, or a newer format after a rollback), is collected as its
// DEL would: the default network's DEL from the current configuration,
// then the record goes, instead of failing every GC round for good.
func TestSpecCNI11_GCCollectsAnUntrustedRecord(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(rec map[string]any)
	}{
		{"invalid attachment", func(rec map[string]any) { plugins(rec, 0)[0].(map[string]any)["type"] = "" }},
		{"newer format", func(rec map[string]any) { rec["version"] = 2 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newHarness(t)
			state := t.TempDir()
			def := filepath.Join(n.dir, "net.d", "10-podnet.conflist")
			writeFile(t, def, `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","stateDir":"`+state+`"}]}`)
			cache := filepath.Join(n.dir, "cache")
			n.conf, _ = json.Marshal(pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet", CacheDir: cache, DefaultNetwork: def})
			ctx := context.Background()
			for _, id := range []string{"kept", "stale"} {
				if _, err := n.d.Handle(ctx, n.request("ADD", id, nil)); err != nil {
					t.Fatalf("ADD %s: %v", id, err)
				}
			}
			formattest.RewriteJSON(t, filepath.Join(cache, "containers", "stale.json"), tt.spoil)
			gc := n.request("GC", "", nil)
			gc.Config, _ = json.Marshal(map[string]any{"cniVersion": "1.1.0", "name": "hwnet", "type": "hwnet",
				"cacheDir": cache, "defaultNetwork": def,
				"cni.dev/valid-attachments": []map[string]string{{"containerID": "kept", "ifname": "eth0"}}})
			if _, err := n.d.Handle(ctx, gc); err != nil {
				t.Fatalf("GC: %v", err)
			}
			ids, _ := attachments.NewStore(cache).List()
			if len(ids) != 1 || ids[0] != "kept" {
				t.Errorf("records after GC = %v, want only kept", ids)
			}
			entries, _ := os.ReadDir(state)
			if len(entries) != 1 || entries[0].Name() != "kept-eth0" {
				t.Errorf("default network's plugin state after GC = %v, want only kept-eth0", entries)
			}
		})
	}
}

// TestSpecCNI11_GCKeepsALiveSandboxWithoutRecord (issue 42 item 6): a
// sandbox the runtime attached to the default network itself, before
// hwnet's configuration was on the node, has no hwnet record; while the
// runtime has it, a GC, the runtime's (CNI 1.1) or the agent's reconcile,
// keeps what the default network holds for it, and frees what it holds for
// a sandbox the runtime no longer has. The default network ends in a
// GC-capable plugin (hwnet-test-plugin: one lease file per attachment,
// freed by GC as an IPAM with GC frees its leases; the reference
// host-local of cniplugins.Version implements no GC) after a real bridge
// and host-local in real network namespaces.
func TestSpecCNI11_GCKeepsALiveSandboxWithoutRecord(t *testing.T) {
	n := newTestNode(t, "gc-norecord")
	leases := filepath.Join(n.dir, "leases")
	def := `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,
  "ipam":{"type":"host-local","subnet":"10.244.0.0/24","dataDir":"` + n.ipamDir() + `","routes":[{"dst":"0.0.0.0/0"}]}},
  {"type":"hwnet-test-plugin","stateDir":"` + leases + `"}]}`
	writeFile(t, filepath.Join(n.dir, "net.d", "10-podnet.conflist"), def)
	for _, tt := range []struct {
		name string
		gc   func(ctx context.Context, live string) error
	}{
		{"CNI GC", func(ctx context.Context, live string) error {
			var conf map[string]any
			if err := json.Unmarshal(n.conf, &conf); err != nil {
				return err
			}
			conf["cniVersion"] = "1.1.0"
			conf["cni.dev/valid-attachments"] = []map[string]string{{"containerID": live, "ifname": "eth0"}}
			gc := n.request("GC", "", nil)
			gc.Config, _ = json.Marshal(conf)
			_, err := n.d.Handle(ctx, gc)
			return err
		}},
		{"reconcile", func(ctx context.Context, live string) error {
			_, err := n.d.Reconcile(ctx, n.conf, n.bin, map[string]bool{live: true}, 0)
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			live, gone := strings.ReplaceAll(tt.name, " ", "-")+"-live", strings.ReplaceAll(tt.name, " ", "-")+"-gone"
			for _, id := range []string{live, gone} {
				n.runtimeAdd(t, def, id, n.podNetns("hwnet-"+id), nil)
			}
			if !exists(filepath.Join(leases, live+"-eth0")) || !exists(filepath.Join(leases, gone+"-eth0")) {
				t.Fatal("the runtime's ADDs left no lease")
			}
			if err := n.node.Run(t.Context(), func() error { return tt.gc(t.Context(), live) }); err != nil {
				t.Fatalf("GC: %v", err)
			}
			if !exists(filepath.Join(leases, live+"-eth0")) {
				t.Error("the GC freed the lease of a live sandbox that has no hwnet record")
			}
			if exists(filepath.Join(leases, gone+"-eth0")) {
				t.Error("the GC kept the lease of a sandbox the runtime no longer has")
			}
			if !slices.Contains(leaseHolders(t, n), live) {
				t.Error("the live sandbox lost its host-local lease")
			}
		})
	}
}

// TestSpecCNI11_GCWithoutTheRuntimesList: a GC whose configuration names
// no valid attachments says nothing of which pods live: it is refused and
// nothing is collected. The spec's first name of the key
// (cni.dev/attachments, containernetworking/cni#1101) is read as the list.
func TestSpecCNI11_GCWithoutTheRuntimesList(t *testing.T) {
	n := newHarness(t)
	state := t.TempDir()
	def := filepath.Join(n.dir, "net.d", "10-podnet.conflist")
	writeFile(t, def, `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","stateDir":"`+state+`"}]}`)
	cache := filepath.Join(n.dir, "cache")
	n.conf, _ = json.Marshal(pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet", CacheDir: cache, DefaultNetwork: def})
	if _, err := n.d.Handle(t.Context(), n.request("ADD", "kept", nil)); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	for _, tt := range []struct {
		name    string
		key     string
		wantErr string
	}{
		{"no list", "", "no cni.dev/valid-attachments"},
		{"the spec's first key", "cni.dev/attachments", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conf := map[string]any{"cniVersion": "1.1.0", "name": "hwnet", "type": "hwnet", "cacheDir": cache, "defaultNetwork": def}
			if tt.key != "" {
				conf[tt.key] = []map[string]string{{"containerID": "kept", "ifname": "eth0"}}
			}
			gc := n.request("GC", "", nil)
			gc.Config, _ = json.Marshal(conf)
			_, err := n.d.Handle(t.Context(), gc)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("GC: %v, want an error saying %q", err, tt.wantErr)
			}
			if ids, _ := attachments.NewStore(cache).List(); !slices.Equal(ids, []string{"kept"}) {
				t.Errorf("records after GC = %v, want kept's", ids)
			}
			if !exists(filepath.Join(state, "kept-eth0")) {
				t.Error("the default network freed what kept holds")
			}
		})
	}
}

// TestSpecCNI11_StatusFollowsTheNetworksInUse: STATUS asks a network from
// the first STATUS after a container attached to it is recorded, and no
// more once the last such container is deleted. A records
// directory whose time could move again within the file system's
// granularity (here: a time ahead of the clock) is read again at the
// next STATUS, even when its time came back the same.
func TestSpecCNI11_StatusFollowsTheNetworksInUse(t *testing.T) {
	n := newHarness(t)
	sideRecords := filepath.Join(t.TempDir(), "side")
	def := filepath.Join(n.dir, "net.d", "10-podnet.conflist")
	writeFile(t, def, `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","personality":"plain"}]}`)
	cacheDir := filepath.Join(n.dir, "cache")
	n.conf, _ = json.Marshal(pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet", CacheDir: cacheDir, DefaultNetwork: def})
	n.createNAD(podNS, "side", "", `{"cniVersion":"1.1.0","name":"side","type":"hwnet-test-plugin","personality":"plain","recordFile":"`+sideRecords+`"}`)
	ctx := context.Background()
	sideAsked := func(step string, want bool) {
		t.Helper()
		before := len(cniplugins.ReadRecords(t, sideRecords))
		if _, err := n.d.Handle(ctx, n.request("STATUS", "", nil)); err != nil {
			t.Fatalf("%s: STATUS: %v", step, err)
		}
		var got bool
		for _, r := range cniplugins.ReadRecords(t, sideRecords)[before:] {
			got = got || r.Command == "STATUS"
		}
		if got != want {
			t.Errorf("%s: network side's STATUS ran: %v, want %v", step, got, want)
		}
	}
	attach := func(id string) {
		t.Helper()
		pod := n.createPod(id, `[{"name":"side"}]`, nil)
		waitPod(t, n, podNS, id)
		if _, err := n.d.Handle(ctx, n.request("ADD", id, pod)); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
	}
	detach := func(id string) {
		t.Helper()
		if _, err := n.d.Handle(ctx, n.request("DEL", id, nil)); err != nil {
			t.Fatalf("DEL %s: %v", id, err)
		}
	}
	records := filepath.Join(cacheDir, "containers")
	setTime := func(at time.Time) {
		t.Helper()
		if err := os.Chtimes(records, at, at); err != nil {
			t.Fatal(err)
		}
	}
	sideAsked("no container", false)
	attach("first")
	setTime(time.Now().Add(-time.Hour)) // as if it attached long ago
	sideAsked("a container attached", true)
	sideAsked("nothing changed", true)
	detach("first")
	sideAsked("its container deleted", false)

	ahead := time.Now().Add(time.Hour)
	attach("second")
	setTime(ahead)
	sideAsked("a container attached, the records' time ahead", true)
	detach("second")
	setTime(ahead)
	sideAsked("its container deleted, the records' time the same", false)
}
