package pools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

// fuzzInventory is a small node for FuzzParse to match configs against: a
// PF with two VFs (one on vfio-pci, one with RDMA and a vDPA device), a PF
// without VFs and a NIC excluded from pods.
const fuzzInventory = `{"pfs": [
	{"pciAddress": "0000:3b:00.0", "vendor": "8086", "device": "1592", "class": "0x020000", "driver": "ice",
	 "model": "E810-C", "numaNode": 0, "linkType": "ethernet", "netdev": {"name": "enp59s0f0"},
	 "excluded": ["SR-IOV PF with 2 VFs enabled"], "sriov": {"totalVFs": 8, "numVFs": 2},
	 "vfs": [
		{"pciAddress": "0000:3b:01.0", "vendor": "8086", "device": "1889", "class": "0x020000", "driver": "iavf",
		 "model": "E810-C", "numaNode": 0, "linkType": "ethernet", "index": 0, "pf": "0000:3b:00.0",
		 "rdma": {"device": "irdma0"}, "vdpa": [{"name": "vdpa0", "driver": "vhost_vdpa"}]},
		{"pciAddress": "0000:3b:01.1", "vendor": "8086", "device": "1889", "class": "0x020000", "driver": "vfio-pci",
		 "model": "E810-C", "numaNode": 0, "linkType": "ethernet", "index": 1, "pf": "0000:3b:00.0"}]},
	{"pciAddress": "0000:41:00.0", "vendor": "15b3", "device": "101b", "class": "0x020700", "driver": "mlx5_core",
	 "model": "ConnectX-6", "numaNode": 1, "linkType": "infiniband", "netdev": {"name": "ibp65s0f0"},
	 "sriov": {"totalVFs": 8}, "vfs": []}],
 "nics": [{"pciAddress": "0000:43:00.0", "vendor": "8086", "device": "1521", "class": "0x020000", "driver": "igb",
	 "numaNode": 0, "linkType": "ethernet", "netdev": {"name": "mgmt"}, "excluded": ["default route"]}]}`

// FuzzParse feeds Parse arbitrary configs, seeded with sriovdp's examples:
// it must never panic, and what it accepts must be whole and must match
// an inventory without a device in two pools.
func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir("testdata/sriovdp")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if filepath.Ext(e.Name()) == ".md" {
			continue
		}
		data, err := os.ReadFile(filepath.Join("testdata/sriovdp", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
		var cm struct{ Data map[string]string }
		if yaml.Unmarshal(data, &cm) == nil {
			for _, cfg := range cm.Data {
				f.Add([]byte(cfg))
			}
		}
	}
	f.Add([]byte(`{"tags": [{"name": "a", "selectors": {"pfNames": ["enp59s0f0"]}}],
		"resourceList": [{"resourceName": "x", "allocationPolicy": "spread", "selectors": [{"tags": ["a"], "isRdma": true}]},
		{"resourceName": "y", "selectors": {"rootDevices": ["0000:3b:00.0#0-1,3"], "vdpaType": "vhost"}}],
		"vfLayouts": [{"name": "l", "selectors": {"pfNames": ["ibp65s0f0"]}, "numVfs": 8, "eswitchMode": "switchdev",
		"drivers": [{"vfs": "0-1,5", "driver": "vfio-pci"}, {"vfs": "2", "driver": "igb_uio"}]}]}`))
	var inv discovery.Inventory
	if err := json.Unmarshal([]byte(fuzzInventory), &inv); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := pools.Parse(data)
		if err != nil {
			if err.Error() == "" {
				t.Error("empty error")
			}
			return
		}
		checkConfig(t, cfg)
		checkMatch(t, cfg, cfg.Match(&inv))
		checkLayouts(t, cfg, &inv)
	})
}

func checkConfig(t *testing.T, cfg *pools.Config) {
	names := map[string]bool{}
	for i, r := range cfg.Resources {
		if r.Name == "" || r.Prefix == "" || r.Index != i || len(r.Selectors) == 0 || names[r.FullName()] {
			t.Errorf("resource %d accepted incomplete or twice: %+v", i, r)
		}
		names[r.FullName()] = true
		switch {
		case r.DeviceType != pools.NetDevice && r.DeviceType != pools.Accelerator && r.DeviceType != pools.AuxNetDevice:
			t.Errorf("resource %d: device type %q", i, r.DeviceType)
		case r.Policy != pools.Pack && r.Policy != pools.Spread:
			t.Errorf("resource %d: policy %q", i, r.Policy)
		}
	}
}

func checkMatch(t *testing.T, cfg *pools.Config, res *pools.Result) {
	if len(res.Pools) != len(cfg.Resources) {
		t.Fatalf("%d pools for %d resources", len(res.Pools), len(cfg.Resources))
	}
	seen := map[string]string{}
	for _, p := range res.Pools {
		for _, d := range p.Devices {
			if other, ok := seen[d.ID]; ok {
				t.Errorf("%s is in %s and %s", d.ID, other, p.Resource.FullName())
			}
			seen[d.ID] = p.Resource.FullName()
			if len(d.Function.Excluded) > 0 {
				t.Errorf("excluded %s pooled in %s", d.ID, p.Resource.FullName())
			}
		}
	}
}

// checkLayouts: an accepted layout's driver ranges lie within its VFs,
// none in two; each PF gets at most one layout, Unfit when it asks for
// more VFs than the PF has.
func checkLayouts(t *testing.T, cfg *pools.Config, inv *discovery.Inventory) {
	for _, l := range cfg.VFLayouts {
		if l.Name == "" || len(l.Selectors) == 0 || l.NumVFs < 0 {
			t.Errorf("layout %d accepted incomplete: %+v", l.Index, l)
		}
		seen := map[int]bool{}
		for _, d := range l.Drivers {
			for _, r := range d.VFs {
				for i := r.First; i <= r.Last; i++ {
					if i >= l.NumVFs || seen[i] {
						t.Fatalf("layout %q: VF %d beyond %d VFs or in two ranges", l.Name, i, l.NumVFs)
					}
					seen[i] = true
				}
			}
		}
	}
	got, _ := cfg.Layouts(inv)
	pfs := map[string]bool{}
	for _, l := range got {
		unfit := l.Layout.NumVFs > l.TotalVFs || (l.Layout.ESwitchMode == "switchdev" && !l.Switchdev)
		if pfs[l.PF] || unfit != (l.Unfit() != "") {
			t.Errorf("PF %s: layout %q twice, or beyond its %d VFs or its switchdev capability without saying so: %q", l.PF, l.Layout.Name, l.TotalVFs, l.Unfit())
		}
		pfs[l.PF] = true
	}
}
