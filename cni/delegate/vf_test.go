package delegate

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// vfNAD is sriov-a with sriov-cni's VF keys on its interface plugin.
const vfNAD = `{"cniVersion":"1.0.0","plugins":[
  {"type":"host-device","vlan":100,"max_tx_rate":1000,"spoofchk":"off","mtu":9000,"capabilities":{"ips":true},"ipam":{"type":"static"}},
  {"type":"tuning","capabilities":{"mac":true}}]}`

// withVFAdmin makes the node's Delegator set VF settings through r.
func (n *testNode) withVFAdmin(r vfadmin.Admin) {
	n.d.opts.VFAdmin, n.d.opts.SysfsRoot = r, n.node.SysRoot()
}

// TestVFSettings_NADKeysSetAndReset (issue 34): a NAD's sriov-cni keys are
// set through the VF's PF at ADD, before the delegate moves the netdev,
// and reported in network-status under hwnet's key; DEL resets them to
// the defaults and the VF's own MTU, also when the agent restarted in
// between (from the record alone).
func TestVFSettings_NADKeysSetAndReset(t *testing.T) {
	n := newTestNode(t, "cni-vf")
	n.createNAD(podNS, "sriov-vf", sriovRes, vfNAD)
	iavf := n.vfs("iavf", "0000:3e:00.0")
	vf := iavf[2]
	ctx := context.Background()
	want := []string{"vlan 100 qos 0 proto 802.1Q", "spoofchk off", "rate 0-1000", "mtu 9000"}
	wantReset := []string{"vlan 0 qos 0 proto 802.1Q", "spoofchk on", "rate 0-0", "mtu " + strconv.Itoa(vf.Netdev.MTU)}
	for _, restart := range []bool{false, true} {
		name := "vf-" + strconv.FormatBool(restart)
		t.Run(name, func(t *testing.T) {
			rec := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
			n.withVFAdmin(rec)
			pod := n.createPod(name, `[{"name":"sriov-vf","ips":["10.56.0.40/24"]}]`, map[string][]string{sriovRes: {vf.Addr}})
			podNetns := n.podNetns("hwnet-" + name)
			waitPod(t, n, podNS, name)
			if _, err := n.call(ctx, "ADD", name, podNetns, pod); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			if got := vfrecord.Ops(t, rec, vf.Addr); !slices.Equal(got, want) {
				t.Errorf("ADD's calls\n got %q\nwant %q", got, want)
			}
			st := networkStatus(t, n, name)
			if len(st) != 2 || st[1].VF == nil || *st[1].VF.VLAN != 100 || *st[1].VF.MaxTxRate != 1000 {
				t.Errorf("network-status %+v, want the VF settings in entry 1", st)
			}
			after := rec
			if restart {
				n.start(ctx)
				after = vfadmin.NewRecorder(filepath.Join(t.TempDir(), "restarted.jsonl"))
				n.withVFAdmin(after)
			}
			before := len(vfrecord.Ops(t, after, vf.Addr))
			if _, err := n.call(ctx, "DEL", name, podNetns, pod); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if got := vfrecord.Ops(t, after, vf.Addr)[before:]; !slices.Equal(got, wantReset) {
				t.Errorf("DEL's calls\n got %q\nwant %q", got, wantReset)
			}
			n.assertNoRecords(t)
		})
	}
}

// notBack is a Recorder whose VF netdev is not back in the node's
// network namespace yet: its MTU cannot be set.
type notBack struct{ *vfadmin.Recorder }

func (notBack) SetMTU(context.Context, vfadmin.VF, int) error {
	return fmt.Errorf("VF netdev: %w", vfadmin.ErrNotBack)
}

// TestVFSettings_FailedResetLeftPending (issue 42): a DEL whose reset
// fails (the VF's netdev is not back yet) is no lost reset: the VF's
// record is left pending on disk, with what the VF had, for the agent to
// retry while the device ledger withholds the VF, and the DEL succeeds.
func TestVFSettings_FailedResetLeftPending(t *testing.T) {
	n := newTestNode(t, "cni-vf-pending")
	n.createNAD(podNS, "sriov-vf", sriovRes, vfNAD)
	vf := n.vfs("iavf", "0000:3e:00.0")[2]
	ctx := context.Background()
	rec := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	n.withVFAdmin(rec)
	pod := n.createPod("vf-pending", `[{"name":"sriov-vf","ips":["10.56.0.41/24"]}]`, map[string][]string{sriovRes: {vf.Addr}})
	podNetns := n.podNetns("hwnet-vf-pending")
	waitPod(t, n, podNS, "vf-pending")
	if _, err := n.call(ctx, "ADD", "vf-pending", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	n.withVFAdmin(notBack{rec})
	if _, err := n.call(ctx, "DEL", "vf-pending", podNetns, pod); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	n.assertNoRecords(t)
	pending, err := vfreset.List(vfreset.Dir(filepath.Join(n.dir, "cache")))
	if err != nil || len(pending) != 1 || pending[0].Record.PCIAddress != vf.Addr || pending[0].Record.Prior == nil {
		t.Fatalf("pending resets %+v (%v), want the VF's with what it had", pending, err)
	}
	if !strings.Contains(pending[0].Reason, "the reset at the teardown of container") {
		t.Errorf("pending reset's reason %q", pending[0].Reason)
	}
}
