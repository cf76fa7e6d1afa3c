package virtualnode_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// sfNums are the sfnums of the PF's SFs, in order.
func sfNums(t *testing.T, n *virtualnode.Node, pf string) []int {
	t.Helper()
	f, ok := n.Device(pf)
	if !ok {
		t.Fatalf("no PF %s", pf)
	}
	var out []int
	for _, sf := range f.SFs {
		out = append(out, sf.Num)
	}
	return out
}

// pfAddrs are the node's SR-IOV PFs, in order.
func pfAddrs(n *virtualnode.Node) []string {
	var out []string
	for _, f := range n.Devices() {
		if f.SRIOV != nil {
			out = append(out, f.Addr)
		}
	}
	return out
}

// sfOf is the PF's SF with this sfnum.
func sfOf(t *testing.T, n *virtualnode.Node, pf string, num int) *virtualnode.SF {
	t.Helper()
	f, _ := n.Device(pf)
	for _, sf := range f.SFs {
		if sf.Num == num {
			return sf
		}
	}
	t.Fatalf("PF %s has no SF %d", pf, num)
	return nil
}

// TestSFPorts: adding an SF port makes its auxiliary device with its
// sfnum, netdev (a real link, its representor the other end) and RDMA
// device, as mlx5 does; deleting one takes them all; the tree and the
// links agree after each. What mlx5 refuses is refused, the node
// unchanged.
func TestSFPorts(t *testing.T) {
	n, h := buildSFLinks(t)
	ctx, pf := t.Context(), n.Devices()[0].Addr
	if err := n.AddSF(ctx, pf, 90); err != nil {
		t.Fatal(err)
	}
	added := sfOf(t, n, pf, 90)
	if got := readAttr(t, filepath.Join(n.SysRoot(), "bus/auxiliary/devices", added.Name, "sfnum")); got != "90" {
		t.Errorf("%s: sfnum %s, want 90", added.Name, got)
	}
	if _, err := os.Stat(filepath.Join(n.SysRoot(), "class/net", added.Netdev.Name)); err != nil || added.RDMA == nil {
		t.Errorf("%s: netdev %s: %v; RDMA %+v", added.Name, added.Netdev.Name, err, added.RDMA)
	}
	checkLinksMatchTree(t, n, h)
	checkTree(t, n)
	gone := sfOf(t, n, pf, 88)
	if err := n.DeleteSF(ctx, pf, 88); err != nil {
		t.Fatal(err)
	}
	if got := sfNums(t, n, pf); !slices.Equal(got, []int{89, 90}) {
		t.Errorf("sfnums %v, want 89 and 90", got)
	}
	for _, p := range []string{gone.SysPath, "bus/auxiliary/devices/" + gone.Name, "class/net/" + gone.Netdev.Name, "class/net/" + gone.Representor.Name} {
		if _, err := os.Lstat(filepath.Join(n.SysRoot(), p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is still there (%v)", p, err)
		}
	}
	checkLinksMatchTree(t, n, h)
	checkTree(t, n)
	for _, tt := range []struct {
		err  error
		want string
	}{
		{n.AddSF(ctx, pf, 89), "EEXIST"},
		{n.DeleteSF(ctx, pf, 88), "ENOENT"},
		{n.AddSF(ctx, pf, 5000), "sfnum 5000"},
	} {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("got %v, want a refusal saying %s", tt.err, tt.want)
		}
	}
	if got := sfNums(t, n, pf); !slices.Equal(got, []int{89, 90}) {
		t.Errorf("after the refusals sfnums %v, want 89 and 90", got)
	}
}

// TestSFPortsRefusedOffMlx5: a PF on another driver than mlx5_core, or
// an InfiniBand port, gets no SF port.
func TestSFPortsRefusedOffMlx5(t *testing.T) {
	n := build(t, mustParse(t, "name: sfoff\npfs:\n  - {model: E810-C, vfs: 1}\n  - {model: ConnectX-6, vfs: 1, linkType: infiniband}\n"), false)
	for i, want := range []string{`"ice"`, "InfiniBand"} {
		if err := n.AddSF(t.Context(), pfAddrs(n)[i], 0); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PF %d: %v, want a refusal naming %s", i, err, want)
		}
	}
}

// TestEnactDevlinkRecord: the kernel emulation adds and deletes the SFs
// an agent's devlink record asks for, each PF's SFs following the last
// add or del of each sfnum; an SF the record never names stays, and a
// del of an SF the PF lacks (gone already) changes nothing.
func TestEnactDevlinkRecord(t *testing.T) {
	n := build(t, sfSpec("sfrecord"), false)
	pf0, pf1 := pfAddrs(n)[0], pfAddrs(n)[1]
	path := filepath.Join(t.TempDir(), "hwnet", "devlink.jsonl")
	vnodetest.EnactDevlinkRecord(t, n, path)
	r, ctx := devlink.NewRecord(path), t.Context()
	steps := []error{r.SetESwitchMode(ctx, pf0, devlink.ModeSwitchdev), r.AddSF(ctx, pf0, 90), r.AddSF(ctx, pf0, 91),
		r.DeleteSF(ctx, pf0, 91), r.DeleteSF(ctx, pf0, 88), r.DeleteSF(ctx, pf1, 7)}
	if err := errors.Join(steps...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "PF 0 with SFs 89 and 90", func() bool { return slices.Equal(sfNums(t, n, pf0), []int{89, 90}) })
	if got := sfNums(t, n, pf1); !slices.Equal(got, []int{88, 89}) {
		t.Errorf("PF 1's SFs %v, want them as built", got)
	}
	checkTree(t, n)
	if got := readAttr(t, filepath.Join(n.SysRoot(), sfOf(t, n, pf0, 90).SysPath, "sfnum")); got != strconv.Itoa(90) {
		t.Errorf("SF 90's sfnum reads %s", got)
	}
}

// TestSFPortBesideAPodsSF: an SF is added while another SF of the PF has
// its netdev in a pod's netns, as after the e2e's pods: the new SF alone
// is looked for among the node's links.
func TestSFPortBesideAPodsSF(t *testing.T) {
	n, h := buildSFLinks(t)
	pf := pfAddrs(n)[0]
	moveInto(t, h, podNetns(t), sfOf(t, n, pf, 88).Netdev.Name, "net1")
	if err := n.AddSF(t.Context(), pf, 90); err != nil {
		t.Fatal(err)
	}
	if got := sfNums(t, n, pf); !slices.Equal(got, []int{88, 89, 90}) {
		t.Errorf("sfnums %v, want 88, 89 and 90", got)
	}
}
