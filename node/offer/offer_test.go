package offer_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
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

// TestUnmovedJudgesAlike: wherever Unmoved says a ledger change moves no
// list of a pool, States and AwaitsRelease with the new ledger are what
// they were with the old, over random changes of random holders (pods of
// the pool's resource and of another, claims, sandboxes of those pods or
// of others, allocations kubelet has not reported) on devices two pools
// of either front end share, with netdevs present, away or gone.
func TestUnmovedJudgesAlike(t *testing.T) {
	const seed, steps = 43, 4000
	rng := rand.New(rand.NewPCG(seed, seed))
	devs := make([]pools.Device, 6)
	links := devhealth.LinkStates{"moved1": {Gone: true}}
	memory := devhealth.NetdevMemory{}
	for i := range devs {
		devs[i] = device(fmt.Sprintf("0000:3b:02.%d", i), "")
		devs[i].Function.Driver = "iavf"
		switch i % 3 {
		case 0: // its netdev is in the node's namespace
			devs[i].Function.Netdev = &discovery.Netdev{Name: fmt.Sprintf("ens%d", i), Up: true, OperState: "up"}
		case 1: // its netdev moved into a pod
			devs[i].Function.Netdev = &discovery.Netdev{Name: fmt.Sprintf("moved%d", i), Elsewhere: true}
		default: // it had a netdev, gone now
			memory[devs[i].ID] = "iavf"
		}
	}
	inv := &discovery.Inventory{}
	frontEnds := []ledger.FrontEnd{{Resource: "intel.com/x"}, {Resource: "intel.com/y", DRA: true}}
	pool := map[ledger.FrontEnd]offer.Pool{
		frontEnds[0]: offer.Pool{}.Rematch(devs[:4], inv, nil),
		frontEnds[1]: offer.Pool{}.Rematch(devs[2:], inv, nil),
	}
	holders := []ledger.Holder{
		{Kind: ledger.Pod, Resource: "intel.com/x", Namespace: "ns", Name: "a", Container: "c", PodUIDs: []string{"ua"}},
		{Kind: ledger.Pod, Resource: "intel.com/z", Namespace: "ns", Name: "b", Container: "c", PodUIDs: []string{"ub"}},
		{Kind: ledger.Pod, Resource: "intel.com/x"}, // not reported by kubelet yet
		{Kind: ledger.Claim, Namespace: "ns", Name: "claim", UID: "uc", PodUIDs: []string{"ud"}},
		{Kind: ledger.Container, Namespace: "ns", Name: "a", Container: "sandbox-a", PodUIDs: []string{"ua"}},
		{Kind: ledger.Container, Namespace: "ns", Name: "d", Container: "sandbox-d", PodUIDs: []string{"ud"}, UID: "uc"},
		{Kind: ledger.Container, Namespace: "ns", Name: "e", Container: "sandbox-e", PodUIDs: []string{"ue"}},
	}
	randomLedger := func(from *ledger.Ledger) *ledger.Ledger {
		byDevice := map[string][]ledger.Holder{}
		for _, d := range devs {
			hs := slices.Clone(from.Holders(d.ID))
			if rng.IntN(3) == 0 { // most devices keep their holders
				hs = nil
				for _, h := range holders {
					if rng.IntN(5) == 0 {
						hs = append(hs, h)
					}
				}
			}
			if len(hs) > 0 {
				byDevice[d.ID] = hs
			}
		}
		var unknown []string
		if rng.IntN(20) == 0 {
			unknown = []string{"kubelet's PodResources: unreachable"}
		}
		return ledger.New(byDevice, unknown)
	}
	view := func(l *ledger.Ledger) devhealth.View {
		return devhealth.View{Inv: inv, Links: links, Netdevs: memory, Held: l.Held()}
	}
	was := ledger.New(map[string][]ledger.Holder{}, nil)
	unmoved, moved := 0, 0
	for step := range steps {
		now := randomLedger(was)
		changed, every := was.Changed(now)
		for _, fe := range frontEnds {
			p := pool[fe]
			if every || !p.Unmoved(view(now), was, now, fe, changed) {
				moved++
				continue
			}
			unmoved++
			before, after := p.States(view(was), was, fe), p.States(view(now), now, fe)
			if !reflect.DeepEqual(before, after) {
				t.Fatalf("seed %d step %d, %v: Unmoved, but the states went from %+v to %+v (holders %v -> %v)",
					seed, step, fe, before, after, holdersOf(was, devs), holdersOf(now, devs))
			}
			if a, b := p.AwaitsRelease(view(was), was, fe), p.AwaitsRelease(view(now), now, fe); a != b {
				t.Fatalf("seed %d step %d, %v: Unmoved, but AwaitsRelease went from %t to %t", seed, step, fe, a, b)
			}
		}
		was = now
	}
	// Neither answer may be the only one: the test would not test it.
	if unmoved < steps/10 || moved < steps/10 {
		t.Fatalf("Unmoved said yes %d times, no %d times, over %d steps: too few of one to tell", unmoved, moved, steps)
	}
}

// holdersOf names each device's holders, for a failure's message.
func holdersOf(l *ledger.Ledger, devs []pools.Device) map[string][]string {
	out := map[string][]string{}
	for _, d := range devs {
		for _, h := range l.Holders(d.ID) {
			out[d.ID] = append(out[d.ID], h.String())
		}
	}
	return out
}
