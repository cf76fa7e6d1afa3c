package offer_test

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

func device(id, pf string) pools.Device {
	return pools.Device{ID: id, PF: pf, VFIndex: 0, Function: &discovery.Function{Address: id, NUMANode: -1}}
}

func resource(name string, mode pools.Mode) pools.Resource {
	return pools.Resource{Prefix: "intel.com", Name: name, Mode: mode}
}

// TestMoving: a mode switch moves every device of the pool; a device
// taken by another pool or by none moves; one that stays where it is does
// not.
func TestMoving(t *testing.T) {
	a, b, c, d := device("0000:3b:02.0", ""), device("0000:3b:02.1", ""), device("0000:3b:02.2", ""), device("0000:3b:02.3", "")
	dp := ledger.FrontEnd{Resource: "intel.com/x"}
	other := ledger.FrontEnd{Resource: "intel.com/y"}
	served := map[ledger.FrontEnd][]pools.Device{dp: {a, b, c}, other: {d}}
	res := &pools.Result{Pools: []pools.Pool{
		{Resource: resource("x", pools.DRA), Devices: []pools.Device{a}},
		{Resource: resource("y", pools.DevicePlugin), Devices: []pools.Device{b, d}},
	}}
	got := offer.Moving(served, res)
	if want := []string{a.ID, b.ID, c.ID}; !slices.Equal(got, want) {
		t.Errorf("Moving = %v, want %v", got, want)
	}
}

// TestNetdevs: a hand-out probes a device's own netdev, unless it is
// away already, and its PF's; a device with neither is not probed.
func TestNetdevs(t *testing.T) {
	withNetdev := func(id, pfName, netdev string, away bool) offer.State {
		d := device(id, "0000:3b:00.0")
		d.PFName = pfName
		if netdev != "" {
			d.Function.Netdev = &discovery.Netdev{Name: netdev}
		}
		return offer.State{Device: d, NetdevAway: away}
	}
	got := offer.Netdevs([]offer.State{
		withNetdev("0000:3b:02.0", "ens1", "ens1v0", false),
		withNetdev("0000:3b:02.1", "ens1", "ens1v1", true),
	}, []offer.State{
		withNetdev("0000:3b:02.2", "", "", false),
		withNetdev("0000:3b:02.3", "ens1", "", false),
	})
	want := map[string]devhealth.Netdevs{
		"0000:3b:02.0": {Own: "ens1v0", PF: "ens1"},
		"0000:3b:02.1": {PF: "ens1"},
		"0000:3b:02.3": {PF: "ens1"},
	}
	if !maps.Equal(got, want) {
		t.Errorf("Netdevs = %v, want %v", got, want)
	}
}

// TestStatesWithhold: what keeps a pool's device from being offered is
// said per device: a fence, a source of holders that cannot be read, a
// holder of another front end; each with its reason.
func TestStatesWithhold(t *testing.T) {
	free, fenced, held := device("0000:3b:02.0", ""), device("0000:3b:02.1", ""), device("0000:3b:02.2", "")
	b := ledger.NewBook(ledger.BookOptions{})
	b.Judge(ledger.Verdicts{})
	ctx := context.Background()
	if err := b.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Fence(ctx, ledger.Fence{Key: "k", Devices: []string{fenced.ID}, Reason: "switching"}, false); err != nil {
		t.Fatal(err)
	}
	claim := ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "c", UID: "u"}
	if err := b.Reserve(ctx, ledger.Request{Devices: []string{held.ID}, Holder: claim}); err != nil {
		t.Fatal(err)
	}
	p := offer.Pool{}.Rematch([]pools.Device{free, fenced, held}, &discovery.Inventory{}, nil)
	v := devhealth.View{Inv: &discovery.Inventory{}, Links: devhealth.LinkStates{}, Netdevs: devhealth.NetdevMemory{}, Held: b.Snapshot().Held()}
	states := p.States(v, b.Snapshot(), ledger.FrontEnd{Resource: "intel.com/x"})
	want := map[string]string{free.ID: "", fenced.ID: "fenced: switching", held.ID: "held by claim ns/c"}
	for _, s := range states {
		if got := s.Withheld(); got != want[s.ID] {
			t.Errorf("%s withheld %q, want %q", s.ID, got, want[s.ID])
		}
	}
	unknown := ledger.NewBook(ledger.BookOptions{}) // never loaded: nothing read yet
	for _, s := range p.States(v, unknown.Snapshot(), ledger.FrontEnd{Resource: "intel.com/x"}) {
		if s.Offered() || s.Unknown == "" {
			t.Errorf("%s offered with the ledger unread: %+v", s.ID, s)
		}
	}
}

// TestRematchSFs: a scalable function the pool lost stays listed,
// unhealthy with the reason, while its PF has it or the PF is gone; one
// its PF no longer has was deleted on purpose and goes.
func TestRematchSFs(t *testing.T) {
	pf := "0000:3b:00.0"
	sf := func(name string) pools.Device {
		s := &discovery.SF{Name: name, AuxType: "sf"}
		return pools.Device{ID: name, PF: pf, VFIndex: -1, SF: s, Function: &discovery.Function{Address: name, NUMANode: -1}}
	}
	kept, excluded, deleted := sf("mlx5_core.sf.2"), sf("mlx5_core.sf.3"), sf("mlx5_core.sf.4")
	inv := &discovery.Inventory{PFs: []discovery.PF{{Function: discovery.Function{Address: pf},
		SFs: []discovery.SF{{Name: kept.ID}, {Name: excluded.ID, Excluded: []string{"its netdev is in use"}}}}}}
	b := ledger.NewBook(ledger.BookOptions{})
	b.Judge(ledger.Verdicts{})
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	v := devhealth.View{Inv: inv, Links: devhealth.LinkStates{}, Netdevs: devhealth.NetdevMemory{}, Held: b.Snapshot().Held()}
	reasons := func(p offer.Pool) map[string]string {
		out := map[string]string{}
		for _, s := range p.States(v, b.Snapshot(), ledger.FrontEnd{Resource: "nvidia.com/sf"}) {
			out[s.ID] = s.Reason
		}
		return out
	}
	p := offer.Pool{Matched: []pools.Device{kept, excluded, deleted}}.Rematch(nil, inv, nil)
	want := map[string]string{kept.ID: "no longer matches the pool's selectors", excluded.ID: "no longer offered: its netdev is in use"}
	if got := reasons(p); !maps.Equal(got, want) {
		t.Errorf("lost SFs %v, want %v", got, want)
	}
	gone := offer.Pool{Matched: []pools.Device{kept}}.Rematch(nil, &discovery.Inventory{}, nil)
	if got := reasons(gone); got[kept.ID] != "its PF "+pf+" disappeared from the PCI bus" {
		t.Errorf("SF of a PF gone: %v", got)
	}
}
