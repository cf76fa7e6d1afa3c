package pools_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// sriovdpConfig returns the config file sriovdp reads from one of its
// examples under testdata/sriovdp: the file itself, or the value of key in
// a ConfigMap's data, as kubelet would mount it.
func sriovdpConfig(t testing.TB, file, key string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/sriovdp", file))
	if err != nil {
		t.Fatal(err)
	}
	if key == "" {
		return data
	}
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(data, &cm); err != nil || cm.Kind != "ConfigMap" {
		t.Fatalf("%s is not a ConfigMap: %v", file, err)
	}
	cfg, ok := cm.Data[key]
	if !ok {
		t.Fatalf("%s has no data key %q", file, key)
	}
	return []byte(cfg)
}

// Virtual nodes whose PFs the examples' selectors match.
var (
	// e810Pair has the PF names of sriovdp's README and deployments
	// examples, enp0s0f0 and enp2s2f1, each with VFs 0-5 on iavf and 6-7
	// on vfio-pci; buses 3b and 3e.
	e810Pair = virtualnode.PFSpec{Model: "E810-C", Count: 2, VFs: 8, VFIO: "6-7", NUMA: []int{0, 1},
		Names: []string{"enp0s0f0", "enp2s2f1"}}
	// x710 has 154c VFs, 0-1 on iavf and 2-3 on vfio-pci.
	x710 = virtualnode.PFSpec{Model: "X710 SFP+", VFs: 4, VFIO: "2-3"}
)

type sriovdpExample struct {
	file, key string
	spec      []virtualnode.PFSpec
	// vdpa lists vDPA devices by parent PCI address: the virtual node has
	// no vdpa bus, so discovery gets them in memory.
	vdpa  vnodetest.VDPA
	pools []namedIDs
	// conflicts are the devices several pools match.
	conflicts []pools.Conflict
	// warnings must each begin one of the config's or the match's.
	warnings []string
}

// TestSriovdpExamples loads sriovdp's example configs unchanged and checks
// the pools they give on a virtual node built to match them.
func TestSriovdpExamples(t *testing.T) {
	db := vnodetest.OpenDB(t)
	readmeDups := []string{"intel.com/intel_sriov_netdevice", "intel.com/intel_sriov_netdevice_additional_env",
		"intel.com/old_selectors_syntax_example"}
	for _, ex := range []sriovdpExample{
		{
			// mlx5 VFs bind mlx5_core, never mlx5_ib, so mlnx_sriov_rdma
			// stays empty; the BCM57508 without VFs is a device itself.
			file: "deployments-configMap.yaml", key: "config.json",
			spec: []virtualnode.PFSpec{e810Pair, {Model: "ConnectX-5", VFs: 2, LinkType: "ethernet"}, {Model: "BCM57508"}},
			pools: []namedIDs{
				{"intel.com/intel_sriov_netdevice", slices.Concat(vfs("3b", 0, 5), vfs("3e", 0, 5))},
				{"intel.com/intel_sriov_dpdk", slices.Concat(vfs("3b", 6, 7), vfs("3e", 6, 7))},
				{"intel.com/mlnx_sriov_rdma", []string{}},
				{"intel.com/brcm_sriov_bnxt", []string{"0000:43:00.0"}},
			},
		},
		{
			// 154c VFs bind iavf today, not i40evf or ixgbevf.
			file: "config.json", spec: []virtualnode.PFSpec{x710},
			pools: []namedIDs{
				{"intel.com/intel_sriov_netdevice", []string{}},
				{"intel.com/intel_sriov_dpdk", vfs("3b", 2, 3)},
			},
		},
		{
			file: "dpdk-configMap.yaml", key: "config.json", spec: []virtualnode.PFSpec{x710},
			pools: []namedIDs{{"intel.com/intel_x710vfio", vfs("3b", 2, 3)}},
		},
		{
			// iavf VFs have no RDMA device, so intel_rdma stays empty.
			file: "rdma-configMap.yaml", key: "config.json",
			spec: []virtualnode.PFSpec{{Model: "ConnectX-4 Lx", VFs: 2}, {Model: "ConnectX-5", VFs: 2, LinkType: "ethernet"},
				{Model: "E810-C", VFs: 2}},
			pools: []namedIDs{
				{"mellanox.com/mlnx_rdma", slices.Concat(vfs("3b", 0, 1), vfs("3d", 0, 1))},
				{"intel.com/intel_rdma", []string{}},
			},
		},
		{
			file: "config-file-configMap.yaml", key: "sriov-node-0",
			spec:  []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 10, Names: []string{"ens785f0", "ens785f1"}}},
			pools: []namedIDs{{"intel.com/sriovnics", slices.Concat(vfs("3b", 0, 4), vfs("3e", 0, 9))}},
		},
		{
			file: "config-file-configMap.yaml", key: "sriov-node-1",
			spec:  []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 10, Names: []string{"ens785f0", "ens785f1"}}},
			pools: []namedIDs{{"intel.com/sriovnics", slices.Concat(vfs("3b", 0, 9), vfs("3e", 0, 4))}},
		},
		{
			// hwnet reads no DDP profiles: both pools stay empty, and say why.
			file: "ddp-x700-configMap.yaml", key: "config.json", spec: []virtualnode.PFSpec{x710},
			pools: []namedIDs{{"intel.com/x700_gtp", []string{}}, {"intel.com/x700_pppoe", []string{}}},
			warnings: []string{
				`resourceList[0] "x700_gtp": selectors.ddpProfiles: hwnet does not read DDP profiles; this selector object matches no device`,
				`resourceList[1] "x700_pppoe": selectors.ddpProfiles: hwnet does not read DDP profiles`,
			},
		},
		{
			// The README's full example: VF 0 of the ConnectX-6 Dx has a
			// vhost_vdpa device, VF 1 a virtio_vdpa one. Three entries
			// select the same E810 VFs; the first gets them.
			file: "readme-config.json",
			spec: []virtualnode.PFSpec{e810Pair, {Model: "ConnectX-6", VFs: 4, LinkType: "infiniband"},
				{Model: "ConnectX-6 Dx", VFs: 2}},
			vdpa: vnodetest.VDPA{
				{Parent: "0000:43:01.0", VDPADevice: discovery.VDPADevice{Name: "vdpa0", Driver: "vhost_vdpa", Path: "/dev/vhost-vdpa-0"}},
				{Parent: "0000:43:01.1", VDPADevice: discovery.VDPADevice{Name: "vdpa1", Driver: "virtio_vdpa", Netdev: "eth0"}},
			},
			pools: []namedIDs{
				{"intel.com/intel_sriov_netdevice", slices.Concat(vfs("3b", 0, 5), vfs("3e", 0, 5))},
				{"intel.com/intel_sriov_dpdk", slices.Concat(vfs("3b", 6, 7), vfs("3e", 6, 7))},
				{"mellanox.com/mlnx_sriov_rdma", []string{}},
				{"intel.com/infiniband_rdma_netdevs", vfs("41", 0, 3)},
				{"intel.com/ct6dx_vdpa_vhost", []string{"0000:43:01.0"}},
				{"intel.com/intel_fpga", []string{}},
				{"nvidia.com/bf2_sf", []string{}},
				{"intel.com/intel_sriov_netdevice_additional_env", []string{}},
				{"intel.com/old_selectors_syntax_example", []string{}},
			},
			conflicts: func() []pools.Conflict {
				var out []pools.Conflict
				for _, id := range slices.Concat(vfs("3b", 0, 5), vfs("3e", 0, 5)) {
					out = append(out, pools.Conflict{Device: id, Pools: readmeDups})
				}
				return out
			}(),
			warnings: []string{
				`resourceList[6] "bf2_sf" nvidia.com/bf2_sf: no device matches`,
				`resourceList[2] "mlnx_sriov_rdma" mellanox.com/mlnx_sriov_rdma: no device matches`,
				`resourceList[7] "intel_sriov_netdevice_additional_env" intel.com/intel_sriov_netdevice_additional_env: ` +
					`every device it matches goes to an earlier pool (see conflicts)`,
			},
		},
	} {
		t.Run(ex.file+"/"+ex.key, func(t *testing.T) {
			cfg, err := pools.Parse(sriovdpConfig(t, ex.file, ex.key))
			if err != nil {
				t.Fatal(err)
			}
			inv := discoverNode(t, db, &virtualnode.Spec{Name: "example", PFs: ex.spec}, ex.vdpa)
			res := cfg.Match(inv)
			if got := poolIDs(res); !reflect.DeepEqual(got, ex.pools) {
				t.Errorf("pools:\n got %v\nwant %v", got, ex.pools)
			}
			sortConflicts(res.Conflicts)
			if !reflect.DeepEqual(res.Conflicts, ex.conflicts) {
				t.Errorf("conflicts:\n got %v\nwant %v", res.Conflicts, ex.conflicts)
			}
			warnings := slices.Concat(cfg.Warnings, res.Warnings)
			for _, w := range ex.warnings {
				if !slices.ContainsFunc(warnings, func(got string) bool { return strings.HasPrefix(got, w) }) {
					t.Errorf("no warning %q in %q", w, warnings)
				}
			}
		})
	}
}

func sortConflicts(cs []pools.Conflict) {
	slices.SortFunc(cs, func(a, b pools.Conflict) int { return strings.Compare(a.Device, b.Device) })
}

// TestSriovdpBrokenExamples: two of sriovdp's examples are not JSON, so
// sriovdp cannot load them either; the error says where.
func TestSriovdpBrokenExamples(t *testing.T) {
	for file, want := range map[string]string{
		"vdpa-configMap.yaml": "config is not valid JSON: line 3, column 9: " +
			"invalid character '{' looking for beginning of object key string",
		"dpdk-virt-configMap.yaml": "config is not valid JSON: line 13, column 7: " +
			"invalid character '}' looking for beginning of object key string",
	} {
		_, err := pools.Parse(sriovdpConfig(t, file, "config.json"))
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %s", file, err, want)
		}
	}
}
