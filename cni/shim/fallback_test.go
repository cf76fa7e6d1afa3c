package shim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
	"github.com/hwnet-io/hwnet/test/cniplugins"
)

// delegates is a pod's set of attachments as the agent would have made
// them, each running hwnet-test-plugin.
type delegates struct {
	pluginDir  string
	stateDir   string
	recordFile string
	store      *attachments.Store
}

func newDelegates(t *testing.T, n *node, pluginDir string) *delegates {
	return &delegates{
		pluginDir:  pluginDir,
		stateDir:   filepath.Join(n.dir, "state"),
		recordFile: filepath.Join(n.dir, "calls.jsonl"),
		store:      attachments.NewStore(n.cacheDir),
	}
}

// attach runs ADD through chain for one network per interface name and
// saves the record, as the agent does; failDel makes those interfaces'
// delegates fail DEL.
func (d *delegates) attach(t *testing.T, cniVersion string, ifNames []string, failDel ...string) *attachment.Record {
	t.Helper()
	// A sandbox path that exists, as a live pod's does: a gone one would
	// make teardown retry failed DELs without it.
	sandbox := filepath.Join(t.TempDir(), "netns-c1")
	if err := os.WriteFile(sandbox, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := &attachment.Record{ContainerID: "c1", Netns: sandbox, PodNamespace: "ns", PodName: "p"}
	ch := chain.New(nil, []string{d.pluginDir}, os.Environ())
	for _, ifName := range ifNames {
		plugin := map[string]any{"type": cniplugins.Recorder, "stateDir": d.stateDir, "recordFile": d.recordFile}
		if slices.Contains(failDel, ifName) {
			plugin["failOn"] = []string{"DEL"}
		}
		confList, err := json.Marshal(map[string]any{"cniVersion": cniVersion, "name": "net-" + ifName, "plugins": []any{plugin}})
		if err != nil {
			t.Fatal(err)
		}
		a := attachment.Attachment{Network: "ns/net-" + ifName, IfName: ifName, ConfList: confList,
			Args: [][2]string{{"K8S_POD_NAMESPACE", "ns"}, {"K8S_POD_NAME", "p"}}}
		dl, err := attachments.Delegate(a)
		if err != nil {
			t.Fatal(err)
		}
		if _, a.Result, err = ch.Add(context.Background(), dl, attachments.Runtime(rec, a)); err != nil {
			t.Fatalf("ADD %s: %v", ifName, err)
		}
		rec.Attachments = append(rec.Attachments, a)
	}
	if err := d.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// live lists the attachments whose delegate state is still there.
func (d *delegates) live(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(d.stateDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// deletes lists, in call order, the interfaces whose delegate ran DEL, and
// whether each was given its ADD result as prevResult.
func (d *delegates) deletes(t *testing.T) (ifNames []string, withPrevResult []bool) {
	t.Helper()
	for _, r := range cniplugins.ReadRecords(t, d.recordFile) {
		if r.Command != "DEL" {
			continue
		}
		var conf struct {
			PrevResult json.RawMessage `json:"prevResult"`
		}
		if err := json.Unmarshal(r.Stdin, &conf); err != nil {
			t.Fatal(err)
		}
		ifNames = append(ifNames, r.Env["CNI_IFNAME"])
		withPrevResult = append(withPrevResult, len(conf.PrevResult) > 0)
	}
	return ifNames, withPrevResult
}

func (d *delegates) delEnv() map[string]string {
	return cniEnv("DEL", "CNI_PATH", d.pluginDir)
}

// TestSpec7_2_DelWithoutAgent: with the agent gone, DEL still tears down
// every attachment from the record (NPWG 7.2), in reverse order of ADD
// (CNI spec, "Network Configuration Lists"), for every CNI version.
func TestSpec7_2_DelWithoutAgent(t *testing.T) {
	pluginDir := cniplugins.Dir(t)
	for _, cniVersion := range version.All.SupportedVersions() {
		t.Run(cniVersion, func(t *testing.T) {
			n := newNode(t)
			d := newDelegates(t, n, pluginDir)
			d.attach(t, cniVersion, []string{"net1", "net2", "net3"})
			if got := d.live(t); len(got) != 3 {
				t.Fatalf("after ADD the delegates hold %v, want 3 attachments", got)
			}
			out := run(context.Background(), d.delEnv(), n.config("1.1.0", "1s"))
			if out.code != 0 || out.stdout != "" {
				t.Fatalf("DEL: exit %d stdout %q stderr %s", out.code, out.stdout, out.stderr)
			}
			if got := d.live(t); len(got) != 0 {
				t.Errorf("after DEL the delegates still hold %v", got)
			}
			order, prev := d.deletes(t)
			if want := []string{"net3", "net2", "net1"}; !slices.Equal(order, want) {
				t.Errorf("DEL order = %v, want %v", order, want)
			}
			// From 0.4.0 libcni hands DEL the cached ADD result; the shim
			// must use the agent's result cache to do the same.
			if atLeast040, _ := version.GreaterThanOrEqualTo(cniVersion, "0.4.0"); atLeast040 && slices.Contains(prev, false) {
				t.Errorf("DEL prevResult given = %v, want the cached ADD result for each", prev)
			}
			if _, err := d.store.Load("c1"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("record after DEL: %v, want it removed", err)
			}
			if !strings.Contains(out.stderr.String(), "running DEL from the attachment record") {
				t.Errorf("stderr does not say which path DEL took: %s", out.stderr)
			}
		})
	}
}

// TestSpec7_2_DelWithoutAgentOneFails: one failed detachment does not stop
// the others, the runtime gets an error naming it, and the record stays so
// the runtime's retry can finish the job.
func TestSpec7_2_DelWithoutAgentOneFails(t *testing.T) {
	n := newNode(t)
	d := newDelegates(t, n, cniplugins.Dir(t))
	d.attach(t, "1.1.0", []string{"net1", "net2", "net3"}, "net2")
	out := run(context.Background(), d.delEnv(), n.config("1.1.0", "1s"))
	wantCNIError(t, out, types.ErrInternal, "ns/net-net2", "interface net2", "record kept")
	order, _ := d.deletes(t)
	if want := []string{"net3", "net2", "net1"}; !slices.Equal(order, want) {
		t.Errorf("DEL order = %v, want %v: a failure must not stop the rest", order, want)
	}
	if got, want := d.live(t), []string{"c1-net2"}; !slices.Equal(got, want) {
		t.Errorf("after DEL the delegates hold %v, want %v", got, want)
	}
	rec, err := d.store.Load("c1")
	if err != nil || len(rec.Attachments) != 3 {
		t.Fatalf("record after a failed DEL: %v, %v; want it kept whole", rec, err)
	}
}

// TestSpecDelIdempotent_NoRecord: DEL of a container hwnet never attached,
// or already deleted, succeeds without an agent.
func TestSpecDelIdempotent_NoRecord(t *testing.T) {
	n := newNode(t)
	for i := range 2 {
		out := run(context.Background(), cniEnv("DEL", "CNI_NETNS", ""), n.config("1.1.0", "1s"))
		if out.code != 0 || out.stdout != "" {
			t.Fatalf("DEL #%d: exit %d stdout %q", i+1, out.code, out.stdout)
		}
		if !strings.Contains(out.stderr.String(), "no attachment record") {
			t.Errorf("stderr does not say there was nothing to delete: %s", out.stderr)
		}
	}
	// As after an uninstall, which removed the directory and must find
	// it still gone however late a DEL comes.
	if _, err := os.Lstat(n.cacheDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("DEL without a record made the record directory %s: %v", n.cacheDir, err)
	}
}

// TestSpec7_3_DelWithoutAgentWaitsForLock: the shim's DEL and an agent
// operation on the same container never overlap.
func TestSpec7_3_DelWithoutAgentWaitsForLock(t *testing.T) {
	n := newNode(t)
	store := attachments.NewStore(n.cacheDir)
	unlock, err := store.Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out := run(ctx, cniEnv("DEL"), n.config("1.1.0", "1s"))
	unlock()
	wantCNIError(t, out, types.ErrInternal, fmt.Sprintf("container %s is busy", "c1"))
}

// TestDelWithoutAgent_NewerRecord: a record a newer hwnet wrote (the
// agent rolled back) is torn down as far as this hwnet reads it, instead
// of refused and the pod left Terminating: an attachment of a kind it
// does not know is passed over.
func TestDelWithoutAgent_NewerRecord(t *testing.T) {
	n := newNode(t)
	d := newDelegates(t, n, cniplugins.Dir(t))
	d.attach(t, "1.0.0", []string{"net1", "net2"})
	path := filepath.Join(n.cacheDir, "containers", "c1.json")
	formattest.RewriteJSON(t, path, func(rec map[string]any) {
		rec["version"], rec["leases"] = 99, []int{1}
		rec["attachments"] = append(rec["attachments"].([]any), map[string]any{"network": "ns/vrf", "ifName": "vrf0", "program": "x"})
	})
	out := run(context.Background(), d.delEnv(), n.config("1.1.0", "1s"))
	if out.code != 0 {
		t.Fatalf("DEL: exit %d stdout %q stderr %s", out.code, out.stdout, out.stderr)
	}
	if got := d.live(t); len(got) != 0 {
		t.Errorf("after DEL the delegates still hold %v", got)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record left after DEL: %v", err)
	}
	if stderr := out.stderr.String(); !strings.Contains(stderr, "format version 99") || !strings.Contains(stderr, "attachments[2]") {
		t.Errorf("DEL did not say what it passed over: %s", stderr)
	}
}

// TestDelWithoutAgent_RuntimeAttachedDefault: with the agent down, DEL of
// a container the runtime attached to the default network itself, before
// hwnet's configuration was on the node, runs that network's DEL from what
// the runtime's libcni cached of the ADD (its result and runtimeConfig
// included) and removes the cache entry; a second DEL runs nothing.
func TestDelWithoutAgent_RuntimeAttachedDefault(t *testing.T) {
	n := newNode(t)
	d := newDelegates(t, n, cniplugins.Dir(t))
	defConf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":%q,"stateDir":%q,"recordFile":%q,"capabilities":{"portMappings":true}}]}`,
		cniplugins.Recorder, d.stateDir, d.recordFile)
	defPath, runtimeCache := filepath.Join(n.dir, "10-podnet.conflist"), filepath.Join(n.dir, "runtime-cni")
	if err := os.WriteFile(defPath, []byte(defConf), 0o644); err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes([]byte(defConf))
	if err != nil {
		t.Fatal(err)
	}
	const ports = `[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]`
	var portMappings any
	if err := json.Unmarshal([]byte(ports), &portMappings); err != nil {
		t.Fatal(err)
	}
	rt := &libcni.RuntimeConf{ContainerID: "c1", NetNS: "/var/run/netns/c1", IfName: "eth0",
		CapabilityArgs: map[string]any{"portMappings": portMappings}}
	ctx := context.Background()
	if _, err := libcni.NewCNIConfigWithCacheDir([]string{d.pluginDir}, runtimeCache, nil).AddNetworkList(ctx, list, rt); err != nil {
		t.Fatalf("the runtime's own ADD: %v", err)
	}
	config := fmt.Sprintf(`{"cniVersion":"1.1.0","name":"hwnet","type":"hwnet","socketPath":%q,"cacheDir":%q,"runtimeCacheDir":%q,"defaultNetwork":%q,"agentWait":"1s"}`,
		n.socket, n.cacheDir, runtimeCache, defPath)
	for i := range 2 {
		if out := run(ctx, d.delEnv(), config); out.code != 0 {
			t.Fatalf("DEL #%d: exit %d stdout %q stderr %s", i+1, out.code, out.stdout, out.stderr)
		}
	}
	if ifNames, prev := d.deletes(t); !slices.Equal(ifNames, []string{"eth0"}) || !prev[0] {
		t.Errorf("DELs of %v with prevResult %v, want one of eth0 with the ADD's result", ifNames, prev)
	}
	if got := d.live(t); len(got) != 0 {
		t.Errorf("after DEL the default network still holds %v", got)
	}
	for _, r := range cniplugins.ReadRecords(t, d.recordFile) {
		if r.Command == "DEL" && !strings.Contains(string(r.Stdin), `"runtimeConfig":{"portMappings":`+ports+`}`) {
			t.Errorf("DEL stdin %s lacks the ADD's runtimeConfig", r.Stdin)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(runtimeCache, "results")); len(entries) > 0 {
		t.Errorf("the runtime's libcni cache still holds %s", entries[0].Name())
	}
}

// TestDelWithoutAgent_LeavesVFResetPending (issue 42): the shim cannot set
// VF settings, so a DEL without the agent leaves the reset of each VF an
// attachment set settings on pending on disk, with what the VF had, before
// it removes the record: the next pod on the VF must not inherit them.
func TestDelWithoutAgent_LeavesVFResetPending(t *testing.T) {
	n := newNode(t)
	d := newDelegates(t, n, cniplugins.Dir(t))
	rec := d.attach(t, "1.0.0", []string{"net1", "net2"})
	vlan, prior := 100, 42
	vf := &vfsettings.Record{PF: "enp59s0f0", PFPCIAddress: "0000:3b:00.0", Index: 1, PCIAddress: "0000:3b:01.1",
		Settings: vfsettings.Settings{VLAN: &vlan}, Prior: &vfsettings.Settings{VLAN: &prior}, Applied: true}
	rec.Attachments[1].VF, rec.Attachments[1].DeviceID = vf, vf.PCIAddress
	if err := d.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	out := run(context.Background(), d.delEnv(), n.config("1.1.0", "1s"))
	if out.code != 0 {
		t.Fatalf("DEL: exit %d stderr %s", out.code, out.stderr)
	}
	if _, err := d.store.Load("c1"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record after DEL: %v, want it removed", err)
	}
	pending, err := vfreset.List(vfreset.Dir(n.cacheDir))
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending resets %+v (%v), want the VF's", pending, err)
	}
	if p := pending[0]; p.Record.PCIAddress != vf.PCIAddress || p.Record.Prior == nil || *p.Record.Prior.VLAN != 42 ||
		!strings.Contains(p.Reason, "container c1 of pod ns/p deleted by the shim") {
		t.Errorf("pending reset %+v, want the VF's record with its prior VLAN and who left it", p)
	}
}
