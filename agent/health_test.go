package agent

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/discovery"
	"github.com/hwnet-io/hwnet/pools"
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
		links          linkStates
		vfio           bool
		held, noNetdev bool
		seenDriver     string
		healthy        bool
		reason         string
	}{
		{name: "all up", pfOper: "up", vfUp: true, vfOper: "up", healthy: true},
		{name: "idle VF, down by admin", pfOper: "up", vfOper: "down", healthy: true},
		{name: "PF down", pfOper: "down", vfUp: true, vfOper: "lowerlayerdown", reason: "PF 0000:3b:00.0 link enp59s0f0 is down"},
		{name: "VF carrier lost", pfOper: "up", vfUp: true, vfOper: "down", reason: "link enp59s0f0v0 is up but has no carrier"},
		{name: "driver without carrier reporting", pfOper: "unknown", vfUp: true, vfOper: "unknown", healthy: true},
		{name: "netlink newer: VF lost carrier", pfOper: "up", vfUp: true, vfOper: "up",
			links: linkStates{"enp59s0f0v0": {operState: "down", up: true}}, reason: "link enp59s0f0v0 is up but has no carrier"},
		{name: "VF moved into a pod", pfOper: "up", vfUp: true, vfOper: "down",
			links: linkStates{"enp59s0f0v0": {gone: true}}, held: true, healthy: true},
		{name: "netdev left while no container holds the VF", pfOper: "up", vfUp: true, vfOper: "down",
			links:  linkStates{"enp59s0f0v0": {gone: true}},
			reason: "its netdev enp59s0f0v0 left the node's network namespace while no container holds the device"},
		{name: "netdev gone, seen before under the same driver", pfOper: "up", noNetdev: true, seenDriver: "iavf",
			reason: "its netdev is gone (driver iavf had one) while no container holds the device"},
		{name: "no netdev, never seen with one", pfOper: "up", noNetdev: true, healthy: true},
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
		d := pools.Device{ID: vf.Address, Function: vf.Function, PF: vf.PF}
		links := tt.links
		if links == nil {
			links = linkStates{}
		}
		v := healthView{inv: inv, links: links, held: map[string]bool{}, netdevs: netdevMemory{}}
		if tt.held {
			v.held[d.ID] = true
		}
		if tt.seenDriver != "" {
			v.netdevs[vf.Address] = tt.seenDriver
		}
		healthy, reason := health(&d, v)
		if healthy != tt.healthy || reason != tt.reason {
			t.Errorf("%s: healthy=%t %q, want %t %q", tt.name, healthy, reason, tt.healthy, tt.reason)
		}
	}
}

// TestLinkStatesSince: netlink states older than a discovery are dropped,
// since the discovery already read them.
func TestLinkStatesSince(t *testing.T) {
	start := time.Now()
	ls := linkStates{"old": {seen: start.Add(-time.Second)}, "new": {seen: start.Add(time.Millisecond)}}
	ls.since(start)
	if _, ok := ls["old"]; ok || len(ls) != 1 {
		t.Errorf("after since: %v, want only the state seen after the discovery began", ls)
	}
}

// TestParseFlagsRejects: bad flags are errors that name the flag.
func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--poll-interval=-1s"},
		{"--rescan-interval=0s"},
		{"--devinfo-gc-interval=0s"},
		{"--log-format=xml"},
		{"--log-level=loud"},
		{"stray"},
	} {
		_, err := parseFlags(args, io.Discard)
		if err == nil {
			t.Errorf("%v: accepted", args)
			continue
		}
		name := strings.TrimLeft(strings.SplitN(args[0], "=", 2)[0], "-")
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %q does not name %s", args, err, name)
		}
	}
}

// TestSameResource: a plugin restarts for anything it hands out, not for
// a selector edit or the entry's move in the file.
func TestSameResource(t *testing.T) {
	base := pools.Resource{Prefix: "intel.com", Name: "r", DeviceType: pools.NetDevice, Policy: pools.Pack,
		AdditionalInfo: map[string]map[string]string{"*": {"k": "v"}}}
	for _, tt := range []struct {
		name   string
		change func(*pools.Resource)
		same   bool
	}{
		{"unchanged", func(*pools.Resource) {}, true},
		{"moved in the file", func(r *pools.Resource) { r.Index = 3 }, true},
		{"selectors edited", func(r *pools.Resource) { r.Selectors = []pools.Selector{{}} }, true},
		{"isRdma", func(r *pools.Resource) { r.IsRDMA = true }, false},
		{"needVhostNet", func(r *pools.Resource) { r.NeedVhostNet = true }, false},
		{"policy", func(r *pools.Resource) { r.Policy = pools.Spread }, false},
		{"additionalInfo", func(r *pools.Resource) { r.AdditionalInfo = map[string]map[string]string{"*": {"k": "w"}} }, false},
	} {
		b := base
		tt.change(&b)
		if got := sameResource(base, b); got != tt.same {
			t.Errorf("%s: sameResource %t, want %t", tt.name, got, tt.same)
		}
	}
}
