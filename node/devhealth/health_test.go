package devhealth_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/devhealth"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

// healthInventory is a PF with one VF, both with netdevs in the given
// states, as discovery would report them.
func healthInventory(t *testing.T, pfOper string, vfUp bool, vfOper string) *discovery.Inventory {
	t.Helper()
	inv := &discovery.Inventory{PFs: []discovery.PF{{
		Function: discovery.Function{Address: "0000:3b:00.0", Driver: "ice",
			Netdev: &discovery.Netdev{Name: "enp59s0f0", Up: true, OperState: pfOper}},
		SRIOV: discovery.SRIOV{NumVFs: 1},
		VFs: []discovery.VF{{PF: "0000:3b:00.0", Function: discovery.Function{Address: "0000:3b:01.0", Driver: "iavf",
			Netdev: &discovery.Netdev{Name: "enp59s0f0v0", Up: vfUp, OperState: vfOper}}}},
	}}}
	data, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var indexed discovery.Inventory
	if err := json.Unmarshal(data, &indexed); err != nil {
		t.Fatal(err)
	}
	return &indexed
}

// TestHealth: the rules kubelet's allocatable follows.
func TestHealth(t *testing.T) {
	for _, tt := range []struct {
		name           string
		pfOper, vfOper string
		vfUp           bool
		links          devhealth.LinkStates
		vfio           bool
		held, noNetdev bool
		elsewhere      bool
		seenDriver     string
		healthy        bool
		reason         string
	}{
		{name: "all up", pfOper: "up", vfUp: true, vfOper: "up", healthy: true},
		{name: "idle VF, down by admin", pfOper: "up", vfOper: "down", healthy: true},
		{name: "PF down", pfOper: "down", vfUp: true, vfOper: "lowerlayerdown", reason: "PF 0000:3b:00.0 link enp59s0f0 is down"},
		// `ip link set down` is reported at once with the operstate it
		// had: the kernel's linkwatch sets "down" up to a second later.
		{name: "PF down by admin, operstate not updated yet", pfOper: "up", vfUp: true, vfOper: "up",
			links: devhealth.LinkStates{"enp59s0f0": {OperState: "up", Up: false}}, reason: "PF 0000:3b:00.0 link enp59s0f0 is down"},
		{name: "VF carrier lost", pfOper: "up", vfUp: true, vfOper: "down", reason: "link enp59s0f0v0 is up but has no carrier"},
		{name: "driver without carrier reporting", pfOper: "unknown", vfUp: true, vfOper: "unknown", healthy: true},
		{name: "netlink newer: VF lost carrier", pfOper: "up", vfUp: true, vfOper: "up",
			links: devhealth.LinkStates{"enp59s0f0v0": {OperState: "down", Up: true}}, reason: "link enp59s0f0v0 is up but has no carrier"},
		{name: "VF moved into a pod", pfOper: "up", vfUp: true, vfOper: "down",
			links: devhealth.LinkStates{"enp59s0f0v0": {Gone: true}}, held: true, healthy: true},
		{name: "netdev left while no container holds the VF", pfOper: "up", vfUp: true, vfOper: "down",
			links:  devhealth.LinkStates{"enp59s0f0v0": {Gone: true}},
			reason: "its netdev enp59s0f0v0 left the node's network namespace while no container holds the device"},
		{name: "netdev gone, seen before under the same driver", pfOper: "up", noNetdev: true, seenDriver: "iavf",
			reason: "its netdev is gone (driver iavf had one) while no container holds the device"},
		{name: "no netdev, never seen with one", pfOper: "up", noNetdev: true, healthy: true},
		{name: "discovered elsewhere while no container holds the VF", pfOper: "up", vfUp: true, vfOper: "up", elsewhere: true,
			reason: "its netdev enp59s0f0v0 left the node's network namespace while no container holds the device"},
		{name: "discovered elsewhere, held", pfOper: "up", vfUp: true, vfOper: "up", elsewhere: true, held: true, healthy: true},
		{name: "discovered elsewhere, back since", pfOper: "up", vfUp: true, vfOper: "up", elsewhere: true,
			links: devhealth.LinkStates{"enp59s0f0v0": {OperState: "up", Up: true}}, healthy: true},
		{name: "vfio-pci without group device", pfOper: "up", vfio: true, healthy: false, reason: "bound to vfio-pci but its VFIO group device is missing"},
	} {
		inv := healthInventory(t, tt.pfOper, tt.vfUp, tt.vfOper)
		vf := inv.PFs[0].VFs[0]
		if tt.vfio {
			vf.Driver, vf.Netdev = "vfio-pci", nil
		}
		if tt.noNetdev {
			vf.Netdev = nil
		}
		if tt.elsewhere {
			vf.Netdev.Elsewhere = true
		}
		d := pools.Device{ID: vf.Address, Function: &vf.Function, PF: vf.PF}
		links := tt.links
		if links == nil {
			links = devhealth.LinkStates{}
		}
		v := devhealth.View{Inv: inv, Links: links, Held: map[string]bool{}, Netdevs: devhealth.NetdevMemory{}}
		if tt.held {
			v.Held[d.ID] = true
		}
		if tt.seenDriver != "" {
			v.Netdevs[vf.Address] = tt.seenDriver
		}
		healthy, reason := v.Device(&d)
		if healthy != tt.healthy || reason != tt.reason {
			t.Errorf("%s: healthy=%t %q, want %t %q", tt.name, healthy, reason, tt.healthy, tt.reason)
		}
	}
}

// TestLinkStatesSince: netlink states older than a discovery are dropped,
// since the discovery already read them, except that a link gone stays
// gone until netlink says otherwise.
func TestLinkStatesSince(t *testing.T) {
	start := time.Now()
	ls := devhealth.LinkStates{
		"old":  {Seen: start.Add(-time.Second), OperState: "down"},
		"new":  {Seen: start.Add(time.Millisecond)},
		"left": {Seen: start.Add(-time.Second), Gone: true},
	}
	ls.Since(start)
	if _, ok := ls["old"]; ok || len(ls) != 2 || !ls["left"].Gone {
		t.Errorf("after Since: %v, want the state seen after the discovery began and the link gone before it", ls)
	}
}

// TestNetdevMemorySeed: an agent that just started remembers, for each VF
// without a netdev, the driver under which another VF of its PF has one:
// such a VF lost its netdev before the restart.
func TestNetdevMemorySeed(t *testing.T) {
	inv := &discovery.Inventory{PFs: []discovery.PF{{
		Function: discovery.Function{Address: "0000:3b:00.0", Driver: "ice"},
		VFs: []discovery.VF{
			{PF: "0000:3b:00.0", Function: discovery.Function{Address: "0000:3b:01.0", Driver: "iavf", Netdev: &discovery.Netdev{Name: "v0"}}},
			{PF: "0000:3b:00.0", Function: discovery.Function{Address: "0000:3b:01.1", Driver: "iavf"}},
			{PF: "0000:3b:00.0", Function: discovery.Function{Address: "0000:3b:01.2", Driver: "vfio-pci"}},
		},
	}}}
	m := devhealth.NetdevMemory{}
	m.Seed(inv)
	want := devhealth.NetdevMemory{"0000:3b:01.0": "iavf", "0000:3b:01.1": "iavf"}
	if len(m) != len(want) || m["0000:3b:01.0"] != "iavf" || m["0000:3b:01.1"] != "iavf" {
		t.Errorf("seeded %v, want %v: the vfio-pci VF never had a netdev", m, want)
	}
}

// TestDeadPF: a VF's PF is dead when its link is down or it left the PCI
// bus; a VF's own fault, or a PF, is not.
func TestDeadPF(t *testing.T) {
	for _, tt := range []struct {
		name           string
		pfOper, vfOper string
		device         pools.Device
		want           bool
	}{
		{"PF link down", "down", "lowerlayerdown", pools.Device{ID: "0000:3b:01.0", PF: "0000:3b:00.0"}, true},
		{"PF up, VF carrier lost", "up", "down", pools.Device{ID: "0000:3b:01.0", PF: "0000:3b:00.0"}, false},
		{"PF up", "up", "up", pools.Device{ID: "0000:3b:01.0", PF: "0000:3b:00.0"}, false},
		{"PF left the PCI bus", "up", "up", pools.Device{ID: "0000:5e:01.0", PF: "0000:5e:00.0"}, true},
		{"a PF itself, link down", "down", "up", pools.Device{ID: "0000:3b:00.0"}, false},
	} {
		inv := healthInventory(t, tt.pfOper, true, tt.vfOper)
		v := devhealth.View{Inv: inv, Links: devhealth.LinkStates{}, Held: map[string]bool{}, Netdevs: devhealth.NetdevMemory{}}
		if got := v.DeadPF(&tt.device); got != tt.want {
			t.Errorf("%s: DeadPF %t, want %t", tt.name, got, tt.want)
		}
	}
}
