package dra_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// netdevVF is a netdev VF of the test node (iavf, VF 1 of enp59s0f0).
const netdevVF = "pci-0000-3b-01-1"

func vfConfig(c *resourceapi.ResourceClaim, vf string) *resourceapi.ResourceClaim {
	return withConfig(c, resourceapi.AllocationConfigSourceClaim, nil,
		`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"sriov-net"}],"vf":`+vf+`}`)
}

// rateRefusingAdmin records through a Recorder and refuses a rate limit,
// as a NIC without one does.
type rateRefusingAdmin struct{ *vfadmin.Recorder }

func (f rateRefusingAdmin) SetRate(ctx context.Context, vf vfadmin.VF, minRate, maxRate uint64) error {
	if maxRate != 0 {
		return errors.New("operation not supported")
	}
	return f.Recorder.SetRate(ctx, vf, minRate, maxRate)
}

// TestVFSettings_PrepareUnprepare (issue 34): a claim's VF settings are
// set through the VF's PF at prepare, each by its own call, reported to
// the CNI side, and reset at unprepare to what the VF had before prepare,
// as its PF reported it (issue 42: an admin's VLAN 42 and spoofchk off,
// the rest a new VF's: trust off, no rates, link auto, a MAC the PF does
// not administer, the netdev's own MTU), by an agent restarted in
// between, from the checkpoint alone.
func TestVFSettings_PrepareUnprepare(t *testing.T) {
	n := newTestNode(t)
	fn, _ := n.inv.Function("0000:3b:01.1")
	origMTU := fn.Netdev.MTU
	dir := t.TempDir()
	rec := vfadmin.NewRecorder(filepath.Join(dir, "calls.jsonl"))
	vlan42, off := 42, false
	if err := rec.Seed(context.Background(), vfadmin.VF{PF: "enp59s0f0", Index: 1, PCIAddress: "0000:3b:01.1"},
		vfsettings.Settings{VLAN: &vlan42, SpoofChk: &off}); err != nil {
		t.Fatal(err)
	}
	p := newPreparer(t, n, dir, rec)
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	c := forPod(vfConfig(claim("v", alloc("vfs", netdevVF)),
		`{"vlan":100,"vlanQoS":3,"spoofchk":false,"trust":true,"maxTxRate":1000,"linkState":"enable","mtu":9000,"macAddress":"02:00:00:00:00:01"}`), "pod-v")
	if res := p.prepare(t, c); res.Err != nil {
		t.Fatal(res.Err)
	}
	want := []string{"macAddress 02:00:00:00:00:01", "vlan 100 qos 3 proto 802.1Q", "spoofchk off", "trust on", "rate 0-1000", "linkState enable", "mtu 9000"}
	if got := vfrecord.Ops(t, rec, "0000:3b:01.1"); !slices.Equal(got, want) {
		t.Errorf("prepare's calls\n got %q\nwant %q", got, want)
	}
	devs, err := p.drv.PodDevices(context.Background(), netclaim.Pod{UID: "pod-v"})
	if err != nil || len(devs) != 1 || devs[0].VF == nil || *devs[0].VF.VLAN != 100 || *devs[0].VF.MaxTxRate != 1000 {
		t.Fatalf("PodDevices %+v (%v), want the applied settings", devs, err)
	}
	restartedRec := vfadmin.NewRecorder(filepath.Join(dir, "after-restart.jsonl"))
	if err := newPreparer(t, n, dir, restartedRec).unprepare(t, "v"); err != nil {
		t.Fatal(err)
	}
	wantReset := []string{"macAddress 00:00:00:00:00:00", "vlan 42 qos 0 proto 802.1Q", "spoofchk off", "trust off", "rate 0-0", "linkState auto", "mtu " + strconv.Itoa(origMTU)}
	if got := vfrecord.Ops(t, restartedRec, "0000:3b:01.1"); !slices.Equal(got, wantReset) {
		t.Errorf("unprepare's calls\n got %q\nwant %q", got, wantReset)
	}
}

// TestVFSettings_Refused: settings a device cannot take fail the prepare
// naming the device and the field, before any call.
func TestVFSettings_Refused(t *testing.T) {
	n := newTestNode(t)
	rec := func(dir string) *vfadmin.Recorder { return vfadmin.NewRecorder(filepath.Join(dir, "calls.jsonl")) }
	tests := []struct {
		name    string
		claim   *resourceapi.ResourceClaim
		noAdmin bool
		want    string
	}{
		{"bad vlan", vfConfig(claim("r1", alloc("vfs", netdevVF)), `{"vlan":4096}`), false, `"vf": "vlan" 4096: want 0 to 4095`},
		{"mtu on vfio-pci", vfConfig(claim("r2", alloc("vfs", "pci-0000-3b-01-6")), `{"mtu":9000}`), false,
			`device 0000:3b:01.6: "mtu" and "macAddress" need the VF's netdev, and it has none (driver "vfio-pci")`},
		{"one MAC for two VFs", vfConfig(claim("r3", alloc("vfs", netdevVF), alloc("vfs", "pci-0000-3b-01-2")), `{"macAddress":"02:00:00:00:00:01"}`), false,
			`"vf": "macAddress" "02:00:00:00:00:01" cannot serve 2 devices`},
		{"no VF admin", vfConfig(claim("r4", alloc("vfs", netdevVF)), `{"vlan":5}`), true, `this agent sets none (--vf-admin)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			r := rec(dir)
			p := newPreparer(t, n, dir, r)
			if tt.noAdmin {
				p = newPreparer(t, n, dir)
			}
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			if res := p.prepare(t, tt.claim); res.Err == nil || !strings.Contains(res.Err.Error(), tt.want) {
				t.Errorf("err %v, want one containing %q", res.Err, tt.want)
			}
			if calls, _ := vfadmin.ReadCalls(r.Path()); len(calls) != 0 {
				t.Errorf("calls %+v, want none", calls)
			}
		})
	}
}

// TestVFSettings_FailedApplyIsUndone: a setting the kernel refuses fails
// the prepare naming it; what was set before it is reset, and the claim
// leaves nothing behind.
func TestVFSettings_FailedApplyIsUndone(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	rec := vfadmin.NewRecorder(filepath.Join(dir, "calls.jsonl"))
	p := newPreparer(t, n, dir, rateRefusingAdmin{rec})
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	res := p.prepare(t, vfConfig(claim("f", alloc("vfs", netdevVF)), `{"vlan":100,"maxTxRate":1000}`))
	if res.Err == nil || !strings.Contains(res.Err.Error(), `set "maxTxRate": operation not supported`) {
		t.Fatalf("err %v, want the failed rate named", res.Err)
	}
	want := []string{"vlan 100 qos 0 proto 802.1Q", "vlan 0 qos 0 proto 802.1Q", "rate 0-0"}
	if got := vfrecord.Ops(t, rec, "0000:3b:01.1"); !slices.Equal(got, want) {
		t.Errorf("calls %q, want %q", got, want)
	}
	data, _ := os.ReadFile(filepath.Join(p.opts.PluginDir, "checkpoint.json"))
	left, _ := os.ReadDir(p.opts.CDIDir)
	if strings.Contains(string(data), "claim-f") || len(left) != 0 {
		t.Errorf("left behind: checkpoint %s, CDI specs %v", data, left)
	}
}

// TestVFSettings_KilledMidApply: an agent killed after the checkpoint
// recorded the settings and before they were all set leaves them
// recorded as not applied: kubelet's retried prepare sets them, and an
// unprepare instead resets them.
func TestVFSettings_KilledMidApply(t *testing.T) {
	for _, then := range []string{"prepare again", "unprepare"} {
		t.Run(then, func(t *testing.T) {
			n := newTestNode(t)
			dir := t.TempDir()
			first := vfadmin.NewRecorder(filepath.Join(dir, "first.jsonl"))
			p := newPreparer(t, n, dir, first)
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			c := vfConfig(claim("k", alloc("vfs", netdevVF)), `{"vlan":100,"maxTxRate":1000}`)
			if res := p.prepare(t, c); res.Err != nil {
				t.Fatal(res.Err)
			}
			// The state the kill leaves: the record written, not applied.
			formattest.RewriteJSON(t, filepath.Join(p.opts.PluginDir, "checkpoint.json"), func(file map[string]any) {
				dev := file["claims"].(map[string]any)["k"].(map[string]any)["devices"].([]any)[0].(map[string]any)
				delete(dev["vf"].(map[string]any), "applied")
				file["version"] = 99 // a checksum this version does not check
			})
			second := vfadmin.NewRecorder(filepath.Join(dir, "second.jsonl"))
			restarted := newPreparer(t, n, dir, second)
			if err := restarted.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			want := []string{"vlan 100 qos 0 proto 802.1Q", "rate 0-1000"}
			if then == "prepare again" {
				if res := restarted.prepare(t, c); res.Err != nil {
					t.Fatal(res.Err)
				}
			} else {
				if err := restarted.unprepare(t, "k"); err != nil {
					t.Fatal(err)
				}
				want = []string{"vlan 0 qos 0 proto 802.1Q", "rate 0-0"}
			}
			if got := vfrecord.Ops(t, second, "0000:3b:01.1"); !slices.Equal(got, want) {
				t.Errorf("calls after the restart %q, want %q", got, want)
			}
			data, _ := os.ReadFile(filepath.Join(p.opts.PluginDir, "checkpoint.json"))
			if then == "prepare again" && !strings.Contains(string(data), `"applied":true`) {
				t.Errorf("checkpoint %s, want the settings recorded as applied", data)
			}
		})
	}
}
