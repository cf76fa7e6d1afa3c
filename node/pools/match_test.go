package pools_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// The default virtual node: E810-C PFs 0000:3b:00.0 (enp59s0f0) and
// 0000:3e:00.0 (enp62s0f0) with VFs 0-5 on iavf and 6-7 on vfio-pci, a
// ConnectX-6 on InfiniBand at 0000:41:00.0 with 4 VFs, and the mgmt NIC,
// which holds the default route. VF 0 of the first E810 has a vhost_vdpa
// device, VF 1 a virtio_vdpa one.
func defaultInventory(t testing.TB) *discovery.Inventory {
	t.Helper()
	return discoverNode(t, vnodetest.OpenDB(t), virtualnode.DefaultSpec(), vnodetest.VDPA{
		{Parent: "0000:3b:01.0", VDPADevice: discovery.VDPADevice{Name: "vdpa0", Driver: "vhost_vdpa"}},
		{Parent: "0000:3b:01.1", VDPADevice: discovery.VDPADevice{Name: "vdpa1", Driver: "virtio_vdpa"}},
	})
}

// TestMatch checks which devices each kind of selector takes, and that a
// device two pools match goes to the first, with a conflict naming both.
func TestMatch(t *testing.T) {
	inv := defaultInventory(t)
	for _, tc := range []struct {
		name, config string
		pools        []namedIDs
		conflicts    []pools.Conflict
	}{
		{"ranges and conflicts", `
resourceList:
  - {resourceName: a, selectors: {pfNames: ["enp59s0f0#0-3"]}}
  - {resourceName: b, selectors: {drivers: [iavf]}}
  - {resourceName: c, selectors: {vendors: ["15b3"]}}`,
			[]namedIDs{
				{"intel.com/a", vfs("3b", 0, 3)},
				{"intel.com/b", slices.Concat(vfs("3b", 4, 5), vfs("3e", 0, 5))},
				{"intel.com/c", vfs("41", 0, 3)},
			},
			[]pools.Conflict{
				{Device: "0000:3b:01.0", Pools: []string{"intel.com/a", "intel.com/b"}},
				{Device: "0000:3b:01.1", Pools: []string{"intel.com/a", "intel.com/b"}},
				{Device: "0000:3b:01.2", Pools: []string{"intel.com/a", "intel.com/b"}},
				{Device: "0000:3b:01.3", Pools: []string{"intel.com/a", "intel.com/b"}},
			}},
		{"any selector object", `
resourceList:
  - resourceName: a
    selectors: [{rootDevices: ["0000:3e:00.0#1,6-7"]}, {pciAddresses: ["0000:3b:01.5"]}]`,
			[]namedIDs{{"intel.com/a", []string{"0000:3b:01.5", "0000:3e:01.1", "0000:3e:01.6", "0000:3e:01.7"}}}, nil},
		{"every field of an object", `
resourceList:
  - {resourceName: a, selectors: {vendors: ["8086"], drivers: [vfio-pci], pfNames: [enp62s0f0]}}`,
			[]namedIDs{{"intel.com/a", vfs("3e", 6, 7)}}, nil},
		{"models and link types", `
resourceList:
  - {resourceName: e810, selectors: {models: [e810-c], linkTypes: [ether]}}
  - {resourceName: ib, selectors: {models: [ConnectX-6], linkTypes: [infiniband]}}
  - {resourceName: none, selectors: {models: [ConnectX-6], linkTypes: [ethernet]}}`,
			[]namedIDs{
				{"intel.com/e810", slices.Concat(vfs("3b", 0, 7), vfs("3e", 0, 7))},
				{"intel.com/ib", vfs("41", 0, 3)},
				{"intel.com/none", []string{}},
			}, nil},
		{"rdma and vdpa", `
resourceList:
  - {resourceName: rdma_e810, selectors: {models: [E810-C], isRdma: true}}
  - {resourceName: rdma_ib, selectors: {linkTypes: [infiniband], isRdma: true}}
  - {resourceName: vhost, selectors: {vendors: ["8086"], vdpaType: vhost}}
  - {resourceName: virtio, selectors: {vendors: ["8086"], vdpaType: virtio}}`,
			[]namedIDs{
				{"intel.com/rdma_e810", []string{}},
				{"intel.com/rdma_ib", vfs("41", 0, 3)},
				{"intel.com/vhost", []string{"0000:3b:01.0"}},
				{"intel.com/virtio", []string{"0000:3b:01.1"}},
			}, nil},
		{"PFs with VFs are not pooled", `
resourceList:
  - {resourceName: pfs, selectors: {pciAddresses: ["0000:3b:00.0", "0000:41:00.0"]}}
  - {resourceName: byname, selectors: {pfNames: [enp59s0f0], drivers: [ice]}}`,
			[]namedIDs{{"intel.com/pfs", []string{}}, {"intel.com/byname", []string{}}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustParse(t, tc.config).Match(inv)
			if got := poolIDs(res); !reflect.DeepEqual(got, tc.pools) {
				t.Errorf("pools:\n got %v\nwant %v", got, tc.pools)
			}
			if !reflect.DeepEqual(res.Conflicts, tc.conflicts) {
				t.Errorf("conflicts:\n got %v\nwant %v", res.Conflicts, tc.conflicts)
			}
		})
	}
}

// TestMatchRebound (issue 44): a VF hwnet bound to vfio-pci for a claim
// stays in the pool of the driver it rests on, though a pool listed
// before matches vfio-pci VFs; without the record it goes there.
func TestMatchRebound(t *testing.T) {
	inv := defaultInventory(t)
	const vf = "0000:3b:01.6" // on vfio-pci in the default node
	cfg := mustParse(t, `
resourceList:
  - {resourceName: dpdk, selectors: {drivers: [vfio-pci]}}
  - {resourceName: both, mode: dra, claimDrivers: [vfio-pci], selectors: {pfNames: [enp59s0f0], drivers: [iavf, vfio-pci]}}`)
	for _, tc := range []struct {
		name    string
		rebound map[string]string
		want    string
	}{
		{"no record", nil, "intel.com/dpdk"},
		{"rebound from iavf", map[string]string{vf: "iavf"}, "intel.com/both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in []string
			for _, p := range cfg.MatchRebound(inv, tc.rebound).Pools {
				if slices.ContainsFunc(p.Devices, func(d pools.Device) bool { return d.ID == vf }) {
					in = append(in, p.Resource.FullName())
				}
			}
			if !slices.Equal(in, []string{tc.want}) {
				t.Errorf("%s in %q, want %s", vf, in, tc.want)
			}
		})
	}
}

// TestMatchExcludedRoot: a device that matches but discovery excluded,
// here the NIC that holds the default route, is not pooled and is named
// with the reason; so is the pool left empty. Discovery sees routes only
// in a real network namespace.
func TestMatchExcludedRoot(t *testing.T) {
	vnodetest.RequireRoot(t)
	db := vnodetest.OpenDB(t)
	spec := virtualnode.DefaultSpec()
	spec.Name = "pools-excluded"
	node := vnodetest.BuildForTest(t, spec, db, true)
	inv, err := discovery.Discover(t.Context(), discovery.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(),
		Netns: "/run/netns/" + node.NetnsName(), DB: db, ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA(nil)})
	if err != nil {
		t.Fatal(err)
	}
	res := mustParse(t, `
resourceList:
  - {resourceName: mgmt, selectors: {vendors: ["8086"], devices: ["1521"]}}`).Match(inv)
	want := []string{
		"0000:43:00.0 matches intel.com/mgmt but is not offered: its netdev mgmt carries the node's default route",
		`resourceList[0] "mgmt" intel.com/mgmt: no device matches`,
	}
	if len(res.Pools[0].Devices) != 0 || !reflect.DeepEqual(res.Warnings, want) {
		t.Errorf("devices %v, warnings:\n%s\nwant none and:\n%s", res.Pools[0].Devices, strings.Join(res.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

func TestConflictString(t *testing.T) {
	conflict := pools.Conflict{Device: "0000:3b:01.0", Pools: []string{"intel.com/a", "intel.com/b"}}
	if got := conflict.String(); got != "0000:3b:01.0 is matched by intel.com/a, intel.com/b; it goes to intel.com/a" {
		t.Errorf("conflict says %q", got)
	}
}

// TestMatchDevices: a pool's devices carry what Allocate needs, sorted by
// ID; a PF without VFs is a device itself, with no PF of its own.
func TestMatchDevices(t *testing.T) {
	inv := discoverNode(t, vnodetest.OpenDB(t), &virtualnode.Spec{Name: "devices", PFs: []virtualnode.PFSpec{
		{Model: "E810-C", VFs: 10, NUMA: []int{1}, Names: []string{"ens1f0"}},
		{Model: "BCM57508", NUMA: []int{1}},
	}}, nil)
	res := mustParse(t, `
resourceList:
  - {resourceName: a, selectors: [{pfNames: ["ens1f0#9,0"]}, {vendors: ["14e4"]}]}`).Match(inv)
	devs := res.Pools[0].Devices
	if len(devs) != 3 {
		t.Fatalf("devices %+v, want VFs 0 and 9 and the BCM57508", devs)
	}
	want := []struct {
		id, pf, pfName string
		vfIndex        int
	}{
		{"0000:3b:01.0", "0000:3b:00.0", "ens1f0", 0},
		{"0000:3b:02.1", "0000:3b:00.0", "ens1f0", 9},
		{"0000:3e:00.0", "", "", -1},
	}
	for i, w := range want {
		d := devs[i]
		if d.ID != w.id || d.PF != w.pf || d.PFName != w.pfName || d.VFIndex != w.vfIndex ||
			d.Function.Address != w.id || d.Function.NUMANode != 1 {
			t.Errorf("device %d: %+v, want %+v on NUMA node 1", i, d, w)
		}
	}
}

// TestMatchWithoutVFNetdevs: a VF whose netdev has moved into a pod's
// network namespace is invisible to the host's netlink and sysfs net/, yet
// keeps its pool: matching uses the PF's name and the function's own IDs,
// driver and link type.
func TestMatchWithoutVFNetdevs(t *testing.T) {
	inv := defaultInventory(t)
	cfg := mustParse(t, `
resourceList:
  - {resourceName: a, selectors: {pfNames: ["enp59s0f0#0-5"], linkTypes: [ether], drivers: [iavf]}}
  - {resourceName: ib, selectors: {rootDevices: ["0000:41:00.0"], linkTypes: [infiniband], isRdma: true}}`)
	before := poolIDs(cfg.Match(inv))
	moved := withoutVFNetdevs(t, inv)
	if after := poolIDs(cfg.Match(moved)); !reflect.DeepEqual(after, before) {
		t.Errorf("with the VFs' netdevs gone: %v, before: %v", after, before)
	}
	if len(before[0].IDs) != 6 || len(before[1].IDs) != 4 {
		t.Errorf("pools %v, want 6 and 4 devices", before)
	}
}

// withoutVFNetdevs returns inv as discovery sees it once every VF's netdev
// is in a pod: no netdev, and the link type from the PCI class.
func withoutVFNetdevs(t *testing.T, inv *discovery.Inventory) *discovery.Inventory {
	t.Helper()
	data, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var moved discovery.Inventory
	if err := json.Unmarshal(data, &moved); err != nil {
		t.Fatal(err)
	}
	for i := range moved.PFs {
		for j := range moved.PFs[i].VFs {
			moved.PFs[i].VFs[j].Netdev = nil
		}
	}
	return &moved
}

// TestMatchDeviceClass: a netDevice pool takes network functions only; an
// accelerator pool takes any class.
func TestMatchDeviceClass(t *testing.T) {
	var inv discovery.Inventory
	err := json.Unmarshal([]byte(`{"pfs": [], "nics": [
		{"pciAddress": "0000:5e:00.0", "vendor": "8086", "device": "0d90", "class": "0x120000", "driver": "ifpga", "numaNode": 0},
		{"pciAddress": "0000:5f:00.0", "vendor": "8086", "device": "1521", "class": "0x020000", "driver": "igb", "numaNode": 0}
	]}`), &inv)
	if err != nil {
		t.Fatal(err)
	}
	res := mustParse(t, `
resourceList:
  - {resourceName: net, selectors: {vendors: ["8086"], devices: ["0d90"]}}
  - {resourceName: fpga, deviceType: accelerator, selectors: {vendors: ["8086"]}}`).Match(&inv)
	want := []namedIDs{{"intel.com/net", []string{}}, {"intel.com/fpga", []string{"0000:5e:00.0", "0000:5f:00.0"}}}
	if got := poolIDs(res); !reflect.DeepEqual(got, want) {
		t.Errorf("pools %v, want %v", got, want)
	}
}

// TestTags: a tag applies to what its selectors match, and a PF's tags to
// its VFs; pools select by tag.
func TestTags(t *testing.T) {
	inv := defaultInventory(t)
	cfg := mustParse(t, `
tags:
  - {name: fabric-a, selectors: {pfNames: [enp59s0f0]}}
  - {name: fabric-b, selectors: {rootDevices: ["0000:3e:00.0#6-7"]}}
  - {name: vfio, selectors: {drivers: [vfio-pci]}}
  - {name: ib, selectors: [{linkTypes: [infiniband]}, {vendors: ["15b3"]}]}
resourceList:
  - {resourceName: a, selectors: {tags: [fabric-a], drivers: [iavf]}}
  - {resourceName: b, selectors: {tags: [fabric-b, ib]}}`)
	want := map[string][]string{"0000:3b:00.0": {"fabric-a"}, "0000:41:00.0": {"ib"}}
	for i := range 8 {
		want[vfs("3b", i, i)[0]] = []string{"fabric-a"}
	}
	for i := range 4 {
		want[vfs("41", i, i)[0]] = []string{"ib"}
	}
	want["0000:3b:01.6"] = []string{"fabric-a", "vfio"}
	want["0000:3b:01.7"] = []string{"fabric-a", "vfio"}
	want["0000:3e:01.6"] = []string{"fabric-b", "vfio"}
	want["0000:3e:01.7"] = []string{"fabric-b", "vfio"}
	if got := cfg.FunctionTags(inv); !reflect.DeepEqual(got, want) {
		t.Errorf("tags:\n got %v\nwant %v", got, want)
	}
	res := cfg.Match(inv)
	wantPools := []namedIDs{
		{"intel.com/a", vfs("3b", 0, 5)},
		{"intel.com/b", slices.Concat(vfs("3e", 6, 7), vfs("41", 0, 3))},
	}
	if got := poolIDs(res); !reflect.DeepEqual(got, wantPools) {
		t.Errorf("pools %v, want %v", got, wantPools)
	}
	for _, p := range res.Pools {
		for _, d := range p.Devices {
			if !reflect.DeepEqual(d.Tags, want[d.ID]) {
				t.Errorf("%s: device tags %v, want %v", d.ID, d.Tags, want[d.ID])
			}
		}
	}
}

// TestMatchSortsDevices: a pool's devices are sorted by ID even when VF
// order is not address order.
func TestMatchSortsDevices(t *testing.T) {
	var inv discovery.Inventory
	err := json.Unmarshal([]byte(`{"pfs": [{"pciAddress": "0000:3b:00.0", "vendor": "8086", "device": "1592",
		"class": "0x020000", "driver": "ice", "netdev": {"name": "p0"}, "vfs": [
		{"pciAddress": "0000:3b:02.0", "vendor": "8086", "device": "1889", "class": "0x020000", "driver": "iavf", "index": 0},
		{"pciAddress": "0000:3b:01.0", "vendor": "8086", "device": "1889", "class": "0x020000", "driver": "iavf", "index": 1}]}]}`), &inv)
	if err != nil {
		t.Fatal(err)
	}
	res := mustParse(t, `{"resourceList": [{"resourceName": "a", "selectors": {"pfNames": ["p0"]}}]}`).Match(&inv)
	devs := res.Pools[0].Devices
	if len(devs) != 2 || devs[0].ID != "0000:3b:01.0" || devs[0].VFIndex != 1 || devs[1].ID != "0000:3b:02.0" {
		t.Errorf("devices %+v, want VF 1 (0000:3b:01.0) then VF 0", devs)
	}
}

// TestMatchMlx4Ports: mlx4 puts both ports of a ConnectX-3 on one
// function; each port is a device of its own (ID <address>:p<dev_port>,
// Netdev the port's), and pfNames picks either port by its netdev.
func TestMatchMlx4Ports(t *testing.T) {
	inv := discoverNode(t, vnodetest.OpenDB(t), &virtualnode.Spec{Name: "mlx4", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-3", LinkType: "infiniband", Names: []string{"ib0"}, DualPort: true},
	}}, nil)
	addr := inv.PFs[0].Address
	for _, tc := range []struct {
		name, config string
		pools        []namedIDs
		netdevs      []string
	}{
		{"both ports", `
resourceList:
  - {resourceName: ib, selectors: {vendors: ["15b3"]}}`,
			[]namedIDs{{"intel.com/ib", []string{addr + ":p0", addr + ":p1"}}}, []string{"ib0", "ib0d1"}},
		{"one port each by pfNames", `
resourceList:
  - {resourceName: second, selectors: {pfNames: [ib0d1]}}
  - {resourceName: first, selectors: {pfNames: [ib0]}}`,
			[]namedIDs{{"intel.com/second", []string{addr + ":p1"}}, {"intel.com/first", []string{addr + ":p0"}}}, []string{"ib0d1", "ib0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := mustParse(t, tc.config).Match(inv)
			if got := poolIDs(res); !reflect.DeepEqual(got, tc.pools) {
				t.Errorf("pools %v, want %v", got, tc.pools)
			}
			var netdevs []string
			for _, p := range res.Pools {
				for _, d := range p.Devices {
					netdevs = append(netdevs, d.Function.Netdev.Name)
					if d.Function.Address != addr {
						t.Errorf("device %s: function %s, want %s", d.ID, d.Function.Address, addr)
					}
				}
			}
			if !slices.Equal(netdevs, tc.netdevs) || len(res.Conflicts) > 0 {
				t.Errorf("netdevs %q conflicts %v, want %q and none", netdevs, res.Conflicts, tc.netdevs)
			}
		})
	}
}

// TestMatchPKeys: pKeys selects the InfiniBand functions whose port's
// default partition key (P_Key table entry 0) is listed, written in any
// case, with or without 0x; the full-membership bit counts, and RoCE
// functions have none.
func TestMatchPKeys(t *testing.T) {
	db := vnodetest.OpenDB(t)
	inv := discoverNode(t, db, &virtualnode.Spec{Name: "pkeys", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-6", LinkType: "infiniband", VFs: 3, VFPKey: "0x8001"},
		{Model: "ConnectX-6", LinkType: "infiniband", VFs: 2},
		{Model: "ConnectX-6", LinkType: "ethernet", VFs: 2},
	}}, nil)
	var tenant, fabric []string
	for _, pf := range inv.PFs {
		if pf.RDMA == nil || (pf.LinkType == "infiniband") != (pf.RDMA.PKey == "0xffff") {
			t.Errorf("PF %s (%s): RDMA %+v, want pKey 0xffff on InfiniBand only", pf.Address, pf.LinkType, pf.RDMA)
		}
		for _, vf := range pf.VFs {
			switch vf.RDMA.PKey {
			case "0x8001":
				tenant = append(tenant, vf.Address)
			case "0xffff":
				fabric = append(fabric, vf.Address)
			}
		}
	}
	if len(tenant) != 3 || len(fabric) != 2 {
		t.Fatalf("VFs by partition key: 0x8001 %q, 0xffff %q; want 3 and 2", tenant, fabric)
	}
	cfg := mustParse(t, `
resourceList:
  - {resourceName: tenant, selectors: {pKeys: ["8001"]}}
  - {resourceName: fabric, selectors: {pKeys: ["0xFFFF"]}}
  - {resourceName: limited, selectors: {pKeys: ["0x7fff"]}}`)
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q, want none", cfg.Warnings)
	}
	want := []namedIDs{{"intel.com/tenant", tenant}, {"intel.com/fabric", fabric}, {"intel.com/limited", []string{}}}
	if got := poolIDs(cfg.Match(inv)); !reflect.DeepEqual(got, want) {
		t.Errorf("pools: %+v\nwant %+v", got, want)
	}
}

// TestMatchSFs: an auxNetDevice pool takes a PF's scalable functions,
// picked as sriovdp picks auxiliary devices: by auxTypes, by their PF's
// vendor, device, driver and netdev name (with a range of sfnums), and by
// an RDMA device; each is a device of its own named by its auxiliary
// device, with its PF. A netDevice pool never takes an SF, nor an
// auxNetDevice pool a VF.
func TestMatchSFs(t *testing.T) {
	db := vnodetest.OpenDB(t)
	inv := discoverNode(t, db, &virtualnode.Spec{Name: "sfs", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-6 Dx", VFs: 2, SFs: 3, Names: []string{"p0"}},
		{Model: "ConnectX-6 Dx", VFs: 1, SFs: 1, Names: []string{"p1"}},
	}}, nil)
	var p0, p1 []discovery.SF
	for _, pf := range inv.PFs {
		switch pf.Netdev.Name {
		case "p0":
			p0 = pf.SFs
		case "p1":
			p1 = pf.SFs
		}
	}
	if len(p0) != 3 || len(p1) != 1 || p0[0].SFNum != 88 || p0[0].RDMA == nil {
		t.Fatalf("SFs of p0 %+v and p1 %+v: want 3 and 1, sfnums from 88, with RDMA devices", p0, p1)
	}
	names := func(sfs ...discovery.SF) []string {
		out := []string{}
		for _, sf := range sfs {
			out = append(out, sf.Name)
		}
		slices.Sort(out)
		return out
	}
	cfg := mustParse(t, `
resourceList:
  - {resourceName: first, deviceType: auxNetDevice, selectors: {auxTypes: [sf], pfNames: ["p0#88-89"]}}
  - {resourceName: rest, deviceType: auxNetDevice, selectors: {vendors: ["15b3"], devices: ["101d"], drivers: [mlx5_core], isRdma: true}}
  - {resourceName: vfs, selectors: {vendors: ["15b3"]}}
  - {resourceName: none, deviceType: auxNetDevice, selectors: {auxTypes: [eth]}}`)
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %q, want none", cfg.Warnings)
	}
	res := cfg.Match(inv)
	var vfs []string
	for _, pf := range inv.PFs {
		for _, vf := range pf.VFs {
			vfs = append(vfs, vf.Address)
		}
	}
	want := []namedIDs{{"intel.com/first", names(p0[:2]...)}, {"intel.com/rest", names(p0[2], p1[0])},
		{"intel.com/vfs", vfs}, {"intel.com/none", []string{}}}
	if got := poolIDs(res); !reflect.DeepEqual(got, want) {
		t.Errorf("pools: %+v\nwant %+v", got, want)
	}
	d := res.Pools[0].Devices[0]
	if d.SF == nil || d.SF.Name != d.ID || d.Function.Address != d.ID || d.PF != inv.PFs[0].Address || d.PFName != "p0" ||
		d.Function.Netdev == nil || d.Function.Netdev.Name != d.SF.Netdev.Name || d.Function.RDMA != d.SF.RDMA {
		t.Errorf("device %+v (function %+v): want the SF with its netdev, RDMA device and PF", d, d.Function)
	}
}
