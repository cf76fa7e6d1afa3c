package delegate

import (
	"context"
	"errors"
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
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
	"github.com/hwnet-io/hwnet/node/devinfo"
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

// DEL of a container whose record cannot be trusted gives back the
// devices of its own device-info files only: not those of a container
// whose ID ends with its own ("x-a" for "a"), whose file a glob of the ID
// matched, taking a running pod's device-info file and VF.
func TestSpec7_2_UntrustedRecordTakesOnlyItsOwnDevices(t *testing.T) {
	n := newTestNode(t, "cni-tail")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	iavf := n.vfs("iavf", "0000:3e:00.0")
	ctx := context.Background()
	pods, netns := map[string]*corev1.Pod{}, map[string]string{}
	for i, id := range []string{"x-a", "a"} {
		pods[id] = n.createPod(id, `[{"name":"sriov-a","ips":["10.56.0.4`+strconv.Itoa(i)+`/24"]}]`, map[string][]string{sriovRes: {iavf[i].Addr}})
		netns[id] = n.podNetns("hwnet-" + id)
		waitPod(t, n, podNS, id)
		if _, err := n.call(ctx, "ADD", id, netns[id], pods[id]); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
	}
	if err := os.Truncate(filepath.Join(n.dir, "cache", "containers", "a.json"), 17); err != nil {
		t.Fatal(err)
	}
	if _, err := n.call(ctx, "DEL", "a", netns["a"], pods["a"]); err != nil {
		t.Fatalf("DEL of a with its record torn: %v", err)
	}
	nodeNS := "/var/run/netns/" + n.node.NetnsName()
	if _, ok := linksIn(t, nodeNS)[iavf[1].Netdev.Name]; !ok {
		t.Errorf("a's VF %s is not back in the node", iavf[1].Addr)
	}
	others := filepath.Join(n.dir, "devinfo", "cni", devinfo.CNIFileName(podNS+"/sriov-a", "x-a", "net1"))
	if _, err := os.Stat(others); err != nil {
		t.Errorf("x-a's device-info file: %v; want it kept", err)
	}
	if _, ok := linksIn(t, netns["x-a"])["net1"]; !ok {
		t.Error("x-a's VF left its pod")
	}
	if _, err := n.call(ctx, "DEL", "x-a", netns["x-a"], pods["x-a"]); err != nil {
		t.Fatalf("DEL of x-a: %v", err)
	}
	n.assertNoRecords(t)
	if _, ok := linksIn(t, nodeNS)[iavf[0].Netdev.Name]; !ok {
		t.Errorf("x-a's VF %s is not back in the node after its own DEL", iavf[0].Addr)
	}
}

// A pod the default network holds though hwnet has no record of it is
// torn down through hwnet all the same, from what the runtime's libcni
// cached: its interface and IP lease go, which stayed for good before.
//   - The runtime attached it itself, before hwnet's configuration was on
//     the node (hwnet installed on a running node): the default network's
//     entry gives the ADD's configuration and result, and goes too.
//   - hwnet attached it and the record went with an uninstall, before hwnet
//     was installed again: hwnet's own entry gives the result; the runtime
//     removes that entry itself once the DEL succeeds.
func TestSpec7_2_DelOfPodWithoutRecord(t *testing.T) {
	n := newTestNode(t, "cni-norecord")
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		attach func(t *testing.T, id, podNetns string) string
	}{
		{"attached before hwnet", func(t *testing.T, id, podNetns string) string {
			n.runtimeAdd(t, n.defaultNet(), id, podNetns, nil)
			return "podnet"
		}},
		{"record gone with an uninstall", func(t *testing.T, id, podNetns string) string {
			pod := n.createPod(id, "", nil)
			waitPod(t, n, podNS, id)
			result, err := n.call(ctx, "ADD", id, podNetns, pod)
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			own := `{"cniVersion":"1.0.0","name":"hwnet","plugins":[` + string(n.conf) + `]}`
			n.runtimeAdd(t, own, id, podNetns, answering(result))
			if err := os.Remove(filepath.Join(n.dir, "cache", "containers", id+".json")); err != nil {
				t.Fatal(err)
			}
			return ""
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := strings.ReplaceAll(tt.name, " ", "-")
			podNetns := n.podNetns("hwnet-" + id)
			removed := tt.attach(t, id, podNetns)
			if !slices.Contains(leaseHolders(t, n), id) {
				t.Fatal("the pod holds no lease of the default network")
			}
			for i := range 2 {
				if _, err := n.call(ctx, "DEL", id, podNetns, nil); err != nil {
					t.Fatalf("DEL #%d through hwnet: %v", i+1, err)
				}
			}
			if _, ok := linksIn(t, podNetns)["eth0"]; ok {
				t.Error("the default network's eth0 is still in the pod")
			}
			if slices.Contains(leaseHolders(t, n), id) {
				t.Error("the default network's IP lease is still held")
			}
			if _, err := os.Stat(filepath.Join(n.runtimeCacheDir(), "results", removed+"-"+id+"-eth0")); removed != "" && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the runtime's libcni cache entry of %s is still there (%v)", removed, err)
			}
			n.assertNoRecords(t)
		})
	}
}

// runtimeAdd is the runtime's ADD of the configuration list to the
// container: real libcni, with its cache in the node's runtime cache
// directory, running the node's plugins or, when exec is set, that.
func (n *testNode) runtimeAdd(t *testing.T, conf, id, podNetns string, exec invoke.Exec) {
	t.Helper()
	list, err := libcni.ConfListFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	runtime := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.runtimeCacheDir(), exec)
	rt := &libcni.RuntimeConf{ContainerID: id, NetNS: podNetns, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", podNS}, {"K8S_POD_NAME", id}}}
	ctx := context.Background()
	if err := n.node.Run(ctx, func() error { _, err := runtime.AddNetworkList(ctx, list, rt); return err }); err != nil {
		t.Fatalf("the runtime's ADD: %v", err)
	}
}

// answering stands in for hwnet's shim in the runtime: what hwnet answered
// the ADD, which the runtime's libcni caches.
type answering []byte

func (a answering) ExecPlugin(context.Context, string, []byte, []string) ([]byte, error) {
	return a, nil
}
func (answering) FindInPath(plugin string, _ []string) (string, error) { return plugin, nil }
func (answering) Decode([]byte) (version.PluginInfo, error) {
	return version.PluginSupports("1.0.0"), nil
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
	// Every plugin of the ADD gets it: the default network's bridge took
	// over 1 s on a loaded 2-core machine (2026-12-02).
	n.d.opts.PluginTimeout = 10 * time.Second
	n.createNAD(podNS, "stuck", "", recorderNAD("stuck", t.TempDir(), `,"hangOn":["ADD"]`))
	pod := n.createPod("stuck", `stuck`, nil)
	podNetns := n.podNetns("hwnet-stuck")
	waitPod(t, n, podNS, "stuck")
	_, err := n.call(context.Background(), "ADD", "stuck", podNetns, pod)
	for _, want := range []string{"cnf/stuck", `type="hwnet-test-plugin"`, "plugin timeout of 10s"} {
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
	n.d.opts.PluginTimeout = 10 * time.Second // as TestSpec7_2_HungPluginTimesOut's
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
	for _, want := range []string{"cnf/meta", `type="hwnet-test-plugin"`, "plugin timeout of 10s"} {
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
