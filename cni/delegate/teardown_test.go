package delegate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
	"github.com/hwnet-io/hwnet/test/cniplugins"
)

// Teardown converges on "already gone" (CNI spec: DEL; NPWG 7.2): a failed
// ADD whose interface never reached the pod, and a DEL whose network
// namespace is gone, leave no record and no device-info file, and the
// runtime's DEL after them succeeds instead of failing at every retry.
func TestSpec7_2_TeardownConvergesOnAlreadyGone(t *testing.T) {
	n := newTestNode(t, "cni-gone")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	iavf := n.vfs("iavf", "0000:3e:00.0")
	ctx := context.Background()

	t.Run("netdev vanished before ADD", func(t *testing.T) {
		vf := iavf[3]
		nodeNS := "/var/run/netns/" + n.node.NetnsName()
		if err := handleAt(t, nodeNS).LinkDel(linksIn(t, nodeNS)[vf.Netdev.Name]); err != nil {
			t.Fatal(err)
		}
		pod := n.createPod("vanished", `[{"name":"sriov-a","ips":["10.56.0.30/24"]}]`, map[string][]string{sriovRes: {vf.Addr}})
		podNetns := n.podNetns("hwnet-vanished")
		waitPod(t, n, podNS, "vanished")
		if _, err := n.call(ctx, "ADD", "vanished", podNetns, pod); err == nil || !strings.Contains(err.Error(), "cnf/sriov-a") {
			t.Fatalf("ADD err = %v, want the sriov-a network's failure", err)
		}
		n.assertNoRecords(t)
		if _, err := n.call(ctx, "DEL", "vanished", podNetns, pod); err != nil {
			t.Errorf("the runtime's DEL after the failed ADD: %v", err)
		}
	})

	t.Run("network namespace gone before DEL", func(t *testing.T) {
		pod := n.createPod("nsgone", `[{"name":"sriov-a","ips":["10.56.0.31/24"]}]`, map[string][]string{sriovRes: {iavf[4].Addr}})
		podNetns := n.podNetns("hwnet-nsgone")
		waitPod(t, n, podNS, "nsgone")
		if _, err := n.call(ctx, "ADD", "nsgone", podNetns, pod); err != nil {
			t.Fatalf("ADD: %v", err)
		}
		if out, err := exec.Command("ip", "netns", "del", "hwnet-nsgone").CombinedOutput(); err != nil {
			t.Fatalf("ip netns del: %v: %s", err, out)
		}
		if _, err := n.call(ctx, "DEL", "nsgone", podNetns, pod); err != nil {
			t.Fatalf("DEL with the namespace gone: %v", err)
		}
		n.assertNoRecords(t)
	})
}

// A record DEL cannot trust never wedges the pod (issues 12 and 30: a
// garbled record kept a pod Terminating with 8 devices allocated; a record
// with an invalid attachment, or a newer agent's after a rollback, failed
// DEL forever, the latter leaking the default network's lease too). DEL
// tears down what of the record it can, the default network from the
// current configuration, gives the VFs the device-info files name back to
// the node under their own names, removes the record and the files, and
// succeeds.
func TestSpec7_2_UntrustedRecordDoesNotWedge(t *testing.T) {
	n := newTestNode(t, "cni-garbled")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	iavf := n.vfs("iavf", "0000:3e:00.0")
	for i, tt := range []struct {
		name  string
		spoil func(t *testing.T, record string)
	}{
		{"truncated", func(t *testing.T, record string) {
			if err := os.Truncate(record, 17); err != nil {
				t.Fatal(err)
			}
		}},
		{"invalid attachment", func(t *testing.T, record string) {
			formattest.RewriteJSON(t, record, func(rec map[string]any) {
				plugins(rec, 1)[0].(map[string]any)["type"] = ""
			})
		}},
		{"newer format", func(t *testing.T, record string) {
			// A newer agent's record, its delegates on a CNI version this
			// one cannot run.
			formattest.RewriteJSON(t, record, func(rec map[string]any) {
				rec["version"] = 2
				for i := range rec["attachments"].([]any) {
					confList(rec, i)["cniVersion"] = "2.0.0"
				}
			})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id, vf := fmt.Sprintf("untrusted-%d", i), iavf[5-i]
			pod := n.createPod(id, `[{"name":"sriov-a","ips":["10.56.0.3`+strconv.Itoa(2+i)+`/24"]}]`, map[string][]string{sriovRes: {vf.Addr}})
			podNetns := n.podNetns("hwnet-" + id)
			waitPod(t, n, podNS, id)
			ctx := context.Background()
			if _, err := n.call(ctx, "ADD", id, podNetns, pod); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			tt.spoil(t, filepath.Join(n.dir, "cache", "containers", id+".json"))
			if _, err := n.call(ctx, "DEL", id, podNetns, pod); err != nil {
				t.Fatalf("DEL with the record %s: %v", tt.name, err)
			}
			n.assertNoRecords(t)
			if _, ok := linksIn(t, podNetns)["eth0"]; ok {
				t.Error("the default network's eth0 is still in the pod")
			}
			if slices.Contains(leaseHolders(t, n), id) {
				t.Error("the default network's IP lease is still held")
			}
			if _, ok := linksIn(t, "/var/run/netns/"+n.node.NetnsName())[vf.Netdev.Name]; !ok {
				t.Errorf("VF %s's netdev %s is not back in the node", vf.Addr, vf.Netdev.Name)
			}
			if _, err := n.call(ctx, "DEL", id, podNetns, pod); err != nil {
				t.Errorf("a second DEL: %v", err)
			}
		})
	}
}

// A pod the runtime attached to the default network itself, before
// hwnet's configuration was on the node (hwnet installed on a running
// node), is torn down through hwnet, which keeps no record of it: from
// what the runtime's libcni cached of the ADD, the default network's DEL
// runs, and its interface, its IP lease and the cache entry go. They
// stayed for good before, the lease taken from the node's range.
func TestSpec7_2_DelOfPodAttachedBeforeHwnet(t *testing.T) {
	n := newTestNode(t, "cni-before")
	podNetns := n.podNetns("hwnet-before")
	ctx := context.Background()
	list, err := libcni.ConfListFromBytes([]byte(n.defaultNet()))
	if err != nil {
		t.Fatal(err)
	}
	runtime := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.runtimeCacheDir(), nil)
	rt := &libcni.RuntimeConf{ContainerID: "before", NetNS: podNetns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", podNS}, {"K8S_POD_NAME", "before"}}}
	if err := n.node.Run(ctx, func() error { _, err := runtime.AddNetworkList(ctx, list, rt); return err }); err != nil {
		t.Fatalf("the runtime's own ADD: %v", err)
	}
	if !slices.Contains(leaseHolders(t, n), "before") {
		t.Fatal("the runtime's ADD took no lease")
	}
	for i := range 2 {
		if _, err := n.call(ctx, "DEL", "before", podNetns, nil); err != nil {
			t.Fatalf("DEL #%d through hwnet: %v", i+1, err)
		}
	}
	if _, ok := linksIn(t, podNetns)["eth0"]; ok {
		t.Error("the default network's eth0 is still in the pod")
	}
	if slices.Contains(leaseHolders(t, n), "before") {
		t.Error("the default network's IP lease is still held")
	}
	if entries, _ := os.ReadDir(filepath.Join(n.runtimeCacheDir(), "results")); len(entries) > 0 {
		t.Errorf("the runtime's libcni cache still holds %s", entries[0].Name())
	}
	n.assertNoRecords(t)
}

// confList is the configuration list of a record's attachment i, as
// formattest.RewriteJSON gives it.
func confList(rec map[string]any, i int) map[string]any {
	return rec["attachments"].([]any)[i].(map[string]any)["confList"].(map[string]any)
}

// plugins is the plugin list of a record's attachment i.
func plugins(rec map[string]any, i int) []any {
	return confList(rec, i)["plugins"].([]any)
}

// assertNoRecords checks hwnet keeps no attachment record and no CNI
// device-info file.
func (n *testNode) assertNoRecords(t *testing.T) {
	t.Helper()
	for _, dir := range []string{filepath.Join(n.dir, "cache", "containers"), filepath.Join(n.dir, "devinfo", "cni")} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s still holds %d entries, first %s", dir, len(entries), entries[0].Name())
		}
	}
}

// An attachment that cannot be prepared fails the ADD before any plugin
// runs, and the rollback runs no DEL either: no plugin is called for
// attachments whose ADD never ran, the default network's included.
func TestSpec7_2_FailedPrepareRunsNoPlugin(t *testing.T) {
	n := newTestNode(t, "cni-badprep")
	state, record := t.TempDir(), filepath.Join(t.TempDir(), "calls.jsonl")
	n.createNAD(podNS, "rec", "", recorderNAD("rec", state, `,"recordFile":"`+record+`"`))
	n.createNAD(podNS, "badargs", "", recorderNAD("badargs", state, `,"recordFile":"`+record+`","args":"not an object"`))
	pod := n.createPod("badprep", `[{"name":"rec"},{"name":"badargs","cni-args":{"x":1}}]`, nil)
	podNetns := n.podNetns("hwnet-badprep")
	waitPod(t, n, podNS, "badprep")
	if _, err := n.call(context.Background(), "ADD", "badprep", podNetns, pod); err == nil || !strings.Contains(err.Error(), "badargs") {
		t.Fatalf("ADD err = %v, want the badargs network's", err)
	}
	if calls := cniplugins.ReadRecords(t, record); len(calls) != 0 {
		t.Errorf("plugins were called %d times, first %s, for attachments whose ADD never ran", len(calls), calls[0].Command)
	}
	n.assertNoRecords(t)
}

// A delegate plugin that never answers is killed after the plugin timeout
// and the ADD fails naming the network and the plugin, instead of holding
// the sandbox until the runtime's deadline at every retry; the rollback
// leaves nothing.
func TestSpec7_2_HungPluginTimesOut(t *testing.T) {
	n := newTestNode(t, "cni-hang")
	n.d.opts.PluginTimeout = time.Second
	n.createNAD(podNS, "stuck", "", recorderNAD("stuck", t.TempDir(), `,"hangOn":["ADD"]`))
	pod := n.createPod("stuck", `stuck`, nil)
	podNetns := n.podNetns("hwnet-stuck")
	waitPod(t, n, podNS, "stuck")
	_, err := n.call(context.Background(), "ADD", "stuck", podNetns, pod)
	for _, want := range []string{"cnf/stuck", `type="hwnet-test-plugin"`, "plugin timeout of 1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("ADD err = %v, want one naming %s", err, want)
		}
	}
	n.assertNoRecords(t)
}

// A DEL that hangs in a plugin that creates no interface (a meta plugin)
// is killed at the plugin timeout and not run again without the namespace:
// twice the timeout ran past kubelet's 2-minute teardown deadline, whose
// Event named neither network nor plugin. The DEL fails once, naming both,
// and the record stays for the runtime's retry.
func TestSpec7_2_HungDelIsNotRetried(t *testing.T) {
	n := newTestNode(t, "cni-hangdel")
	n.d.opts.PluginTimeout = time.Second
	record := filepath.Join(t.TempDir(), "calls.jsonl")
	n.createNAD(podNS, "meta", "", `{"cniVersion":"1.0.0","name":"meta","type":"hwnet-test-plugin","personality":"plain",
  "stateDir":"`+t.TempDir()+`","hangOn":["DEL"],"recordFile":"`+record+`"}`)
	pod := n.createPod("hangdel", `meta`, nil)
	podNetns := n.podNetns("hwnet-hangdel")
	waitPod(t, n, podNS, "hangdel")
	ctx := context.Background()
	if _, err := n.call(ctx, "ADD", "hangdel", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	_, err := n.call(ctx, "DEL", "hangdel", podNetns, pod)
	for _, want := range []string{"cnf/meta", `type="hwnet-test-plugin"`, "plugin timeout of 1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("DEL err = %v, want one naming %s", err, want)
		}
	}
	dels := 0
	for _, c := range cniplugins.ReadRecords(t, record) {
		if c.Command == "DEL" {
			dels++
		}
	}
	if dels != 1 {
		t.Errorf("the hanging plugin's DEL ran %d times, want once", dels)
	}
}
