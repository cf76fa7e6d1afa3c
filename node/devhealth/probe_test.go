package devhealth_test

import (
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// probedNode is a virtual node of one PF with one VF, a probe in its
// network namespace (closed with the test), that namespace's path, the VF
// and the PF.
func probedNode(t *testing.T, name string) (*devhealth.Probe, string, virtualnode.Function, virtualnode.Function) {
	t.Helper()
	node := vnodetest.BuildForTest(t, &virtualnode.Spec{Name: name, PFs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 1}}},
		vnodetest.OpenDB(t), true)
	path := "/run/netns/" + node.NetnsName()
	p, err := devhealth.NewProbe(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	var vf, pf virtualnode.Function
	for _, f := range node.Devices() {
		if f.IsVF() {
			vf = f
		} else {
			pf = f
		}
	}
	return p, path, vf, pf
}

// TestProbe: the probe asks the node's namespace whether a
// device's netdev is there: the VF's is until it leaves (here renamed
// away, as a move into a pod looks from the node); a device it was given
// no netdev for is not asked.
func TestProbe(t *testing.T) {
	p, path, vf, _ := probedNode(t, "probe")
	p.Expect(map[string]devhealth.Netdevs{vf.Addr: {Own: vf.Ifname}})
	if err := p.Present(vf.Addr); err != nil {
		t.Fatalf("Present(%s) with its netdev %s there: %v", vf.Addr, vf.Ifname, err)
	}
	if err := p.Present("0000:00:00.0"); err != nil {
		t.Errorf("Present of a device without a netdev to probe: %v", err)
	}
	h := handleAt(t, path)
	link, err := h.LinkByName(vf.Ifname)
	if err == nil {
		err = h.LinkSetName(link, "elsewhere0")
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Present(vf.Addr); err == nil || !strings.Contains(err.Error(), "its netdev "+vf.Ifname+" is not in the node's network namespace") {
		t.Errorf("Present(%s) with its netdev gone: %v", vf.Addr, err)
	}
	if _, err := devhealth.NewProbe("/run/netns/none-such"); err == nil || !strings.Contains(err.Error(), "none-such") {
		t.Errorf("NewProbe of a namespace that is not there: %v", err)
	}
}

// TestProbePFUp: the probe asks the node's namespace whether a VF's PF
// has its link up: up it is, taken down it is not, and a PF netdev gone
// (renamed away) is no link up either; a device it was given no PF for is
// not asked.
func TestProbePFUp(t *testing.T) {
	p, path, vf, pf := probedNode(t, "probepf")
	p.Expect(map[string]devhealth.Netdevs{vf.Addr: {Own: vf.Ifname, PF: pf.Ifname}})
	h := handleAt(t, path)
	link, err := h.LinkByName(pf.Ifname)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func() error
		want   string
	}{
		{"up", func() error { return nil }, ""},
		{"taken down", func() error { return h.LinkSetDown(link) }, "its PF's link " + pf.Ifname + " is down"},
		{"renamed away", func() error { return h.LinkSetName(link, "elsewhere0") }, "its PF's netdev " + pf.Ifname + " is not in the node's network namespace"},
	}
	for _, st := range steps {
		if err := st.change(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		err := p.PFUp(vf.Addr)
		if (st.want == "") != (err == nil) || err != nil && err.Error() != st.want {
			t.Errorf("PFUp(%s), its PF %s: %v, want %q", vf.Addr, st.name, err, st.want)
		}
	}
	if err := p.PFUp(pf.Addr); err != nil {
		t.Errorf("PFUp of a device without a PF netdev to probe: %v", err)
	}
}

// BenchmarkPresent: one hand-out's probe of a VF's netdev on a node of
// 64 VFs, and netlink's RTM_GETLINK of the same name beside it, which
// the probe asked before.
func BenchmarkPresent(b *testing.B) {
	node := vnodetest.BuildForTest(b, &virtualnode.Spec{Name: "probe", PFs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 64}}},
		vnodetest.OpenDB(b), true)
	path := "/run/netns/" + node.NetnsName()
	var vf virtualnode.Function
	for _, f := range node.Devices() {
		if f.IsVF() {
			vf = f
		}
	}
	b.Run("probe", func(b *testing.B) {
		p, err := devhealth.NewProbe(path)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		p.Expect(map[string]devhealth.Netdevs{vf.Addr: {Own: vf.Ifname}})
		for b.Loop() {
			if err := p.Present(vf.Addr); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("netlink-getlink", func(b *testing.B) {
		h := handleAt(b, path)
		for b.Loop() {
			if _, err := h.LinkByName(vf.Ifname); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// handleAt is a netlink handle in the network namespace at path, closed
// with the test.
func handleAt(tb testing.TB, path string) *netlink.Handle {
	tb.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Close)
	return h
}
