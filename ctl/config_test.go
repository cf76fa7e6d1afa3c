package ctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// poolConfig is a config for the default virtual node: tags, a VF range,
// a conflict, a pool handing out CDI devices, a pool served through DRA,
// the InfiniBand VFs and a pool left empty.
const poolConfig = `
tags:
  - {name: fabric-a, selectors: {pfNames: [enp59s0f0]}}
resourceList:
  - {resourceName: low, selectors: {pfNames: ["enp59s0f0#0-1"]}}
  - {resourceName: netdev, cdi: true, selectors: {drivers: [iavf], tags: [fabric-a]}}
  - {resourceName: dpdk, mode: dra, claimDrivers: [iavf], selectors: {drivers: [vfio-pci, iavf], pfNames: ["enp59s0f0#6-7", "enp62s0f0#6-7"]}}
  - {resourceName: ib, resourcePrefix: nvidia.com, selectors: {linkTypes: [infiniband], isRdma: true}}
  - {resourceName: gtp, selectors: {devices: ["1889"], ddpProfiles: [GTP]}}
`

func writeConfig(t *testing.T, name, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func configCheckArgs(t *testing.T, config string, more ...string) []string {
	node := treeNode(t)
	return append([]string{"config", "check", "--config", writeConfig(t, "pools.yaml", config),
		"--sysfs", node.SysRoot(), "--dev", node.DevRoot()}, more...)
}

// TestConfigCheckTable: each pool with its devices by PF and NUMA node,
// then the conflicts and the warnings.
func TestConfigCheckTable(t *testing.T) {
	code, out, errOut := run(t, configCheckArgs(t, poolConfig)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"intel.com/low (netDevice): 2 devices\n" +
			"  PF            NETDEV     NUMA  VFS  DEVICES\n" +
			"  0000:3b:00.0  enp59s0f0  0     0-1  2\n",
		"intel.com/netdev (netDevice, CDI devices): 4 devices\n" +
			"  PF            NETDEV     NUMA  VFS  DEVICES\n" +
			"  0000:3b:00.0  enp59s0f0  0     2-5  4\n",
		"intel.com/dpdk (netDevice, through DRA, claims may ask for iavf): 4 devices\n" +
			"  PF            NETDEV     NUMA  VFS  DEVICES\n" +
			"  0000:3b:00.0  enp59s0f0  0     6-7  2\n" +
			"  0000:3e:00.0  enp62s0f0  1     6-7  2\n",
		"nvidia.com/ib (netDevice): 4 devices\n",
		"intel.com/gtp (netDevice): 0 devices\n",
		"Conflicts:\n  0000:3b:01.0 is matched by intel.com/low, intel.com/netdev; it goes to intel.com/low\n" +
			"  0000:3b:01.1 is matched by intel.com/low, intel.com/netdev; it goes to intel.com/low\n",
		"Warnings:\n  resourceList[4] \"gtp\": selectors.ddpProfiles: hwnet does not read DDP profiles; this selector object matches no device\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks\n%s\n---- output:\n%s", want, out)
		}
	}
}

// TestConfigCheckVFLayouts: what the vfLayouts say on this node are
// warnings: a layout asking a PF for more VFs than its sriov_totalvfs, and
// a PF two layouts select.
func TestConfigCheckVFLayouts(t *testing.T) {
	config := poolConfig + `
vfLayouts:
  - {name: many, selectors: {pfNames: [enp59s0f0]}, numVfs: 300}
  - {name: ib, selectors: {pfNames: [ibp65s0f0]}, numVfs: 8}
  - {name: mellanox, selectors: {vendors: ["15b3"]}, numVfs: 4}
`
	code, out, errOut := run(t, configCheckArgs(t, config)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		`vfLayouts[0] "many": numVfs 300 is more than PF 0000:3b:00.0 has (sriov_totalvfs 256); not applied`,
		`PF 0000:41:00.0 is matched by vfLayouts[2] "mellanox" too; vfLayouts[1] "ib" applies`,
	} {
		if !strings.Contains(out, "\n  "+want+"\n") {
			t.Errorf("warnings lack\n%s\n---- output:\n%s", want, out)
		}
	}
}

// TestConfigCheckJSON: the same as data, for scripts.
func TestConfigCheckJSON(t *testing.T) {
	code, out, errOut := run(t, configCheckArgs(t, poolConfig, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var report struct {
		Pools []struct {
			Resource, DeviceType, Mode string
			CDI                        bool
			ClaimDrivers               []string
			Devices                    []struct {
				ID, PF, PFName string
				VFIndex        int
				NUMANode       int
				Tags           []string
			}
		}
		Conflicts []struct {
			Device string
			Pools  []string
		}
		Warnings []string
	}
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(report.Pools) != 5 || len(report.Conflicts) != 2 || len(report.Warnings) != 1 {
		t.Fatalf("%d pools, %d conflicts, %d warnings; want 5, 2, 1: %s", len(report.Pools), len(report.Conflicts), len(report.Warnings), out)
	}
	low := report.Pools[0]
	dev := low.Devices[1]
	if low.Resource != "intel.com/low" || low.DeviceType != "netDevice" || len(low.Devices) != 2 ||
		dev.ID != "0000:3b:01.1" || dev.PF != "0000:3b:00.0" || dev.PFName != "enp59s0f0" || dev.VFIndex != 1 ||
		dev.NUMANode != 0 || !reflect.DeepEqual(dev.Tags, []string{"fabric-a"}) {
		t.Errorf("first pool %+v", low)
	}
	if modes := []string{report.Pools[0].Mode, report.Pools[2].Mode}; !reflect.DeepEqual(modes, []string{"devicePlugin", "dra"}) {
		t.Errorf("pools low and dpdk are served %q, want devicePlugin and dra", modes)
	}
	if cdi := []bool{report.Pools[0].CDI, report.Pools[1].CDI}; !reflect.DeepEqual(cdi, []bool{false, true}) {
		t.Errorf("pools low and netdev hand out CDI devices: %v, want false, true", cdi)
	}
	if d := report.Pools[2].ClaimDrivers; !reflect.DeepEqual(d, []string{"iavf"}) {
		t.Errorf("pool dpdk's claims may ask for %q, want iavf", d)
	}
	if c := report.Conflicts[0]; c.Device != "0000:3b:01.0" || !reflect.DeepEqual(c.Pools, []string{"intel.com/low", "intel.com/netdev"}) {
		t.Errorf("first conflict %+v", c)
	}
}

// TestConfigCheckErrors: a bad config exits 1 with every problem, each on
// its own line; command line mistakes exit 2.
func TestConfigCheckErrors(t *testing.T) {
	node := treeNode(t)
	badConfig := writeConfig(t, "bad.json", `{"resourceList": [
		{"resourceName": "a", "selectors": {"pfNames": ["enp59s0f0#3-1"]}},
		{"resourceName": "b", "deviceType": "vfio", "selectors": {"vendors": ["8086"]}}]}`)
	modelConfig := writeConfig(t, "model.yaml", "resourceList:\n  - {resourceName: a, selectors: {models: [I350-T4]}}\n")
	models := writeConfig(t, "models.yaml", `- {name: I350-T4, family: Intel I350, vendor: "8086", pfDevice: "1521", vfDevice: "1520",
   pfDrivers: [igb], vfDrivers: [igbvf], maxVFs: 7, linkTypes: [ethernet], dpdk: vfio-pci}
`)
	nodeArgs := []string{"--sysfs", node.SysRoot(), "--dev", node.DevRoot()}
	for _, tc := range []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"config"}, 2, "want a subcommand: check"},
		{[]string{"config", "lint"}, 2, `unknown subcommand "lint"`},
		{[]string{"config", "check"}, 2, "--config: want the config file to check"},
		{[]string{"config", "check", "--config", badConfig, "-o", "yaml"}, 2, `unknown output format "yaml"`},
		{[]string{"config", "check", "--config", badConfig, "extra"}, 2, `unexpected argument "extra"`},
		{append([]string{"config", "check", "--config", badConfig}, nodeArgs...), 1, "hwnetctl config: config " + badConfig + ": " +
			`resourceList[0] "a": selectors.pfNames[0]: "enp59s0f0#3-1": range 3-1 is reversed` + "\n" +
			`  resourceList[1] "b": deviceType: "vfio": want "netDevice", "accelerator" or "auxNetDevice"` + "\n"},
		{append([]string{"config", "check", "--config", modelConfig}, nodeArgs...), 1,
			`resourceList[0] "a": selectors.models[0]: "I350-T4": not a model in the hardware database`},
		{[]string{"config", "check", "--config", "/nonexistent.json"}, 1, "open /nonexistent.json"},
		{[]string{"config", "check", "--config", modelConfig, "--sysfs", "/nonexistent"}, 1, `sysfs root "/nonexistent"`},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
			t.Errorf("hwnetctl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.inStderr)
		}
	}
	args := append([]string{"config", "check", "--config", modelConfig, "--hwdb", models}, nodeArgs...)
	if code, out, errOut := run(t, args...); code != 0 || !strings.Contains(out, "intel.com/a (netDevice): 1 device\n") {
		t.Errorf("with the admin's model: exit %d, %s%s", code, out, errOut)
	}
}

// TestConfigCheckRootVirtioNotPooled: on a VM whose only NIC is virtio-net
// (its netdev below virtio0) and carries the default route, a pool of
// vendors ["1af4"] gets nothing, and the table says why.
func TestConfigCheckRootVirtioNotPooled(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	spec := &virtualnode.Spec{Name: "ctl-vm", NICs: []virtualnode.NICSpec{
		{Name: "eth0", Vendor: "1af4", Device: "1041", Driver: "virtio-pci", NetdevUnder: "virtio0", DefaultRoute: true}}}
	node := vnodetest.BuildForTest(t, spec, db, true)
	config := writeConfig(t, "pools.json", `{"resourceList":[{"resourceName":"virtio","selectors":{"vendors":["1af4"]}}]}`)
	code, out, errOut := run(t, "config", "check", "--config", config, "--sysfs", node.SysRoot(), "--dev", node.DevRoot(),
		"--netns", "/run/netns/"+node.NetnsName())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "intel.com/virtio (netDevice): 0 devices") || !strings.Contains(out, "carries the node's default route") {
		t.Errorf("config check pooled the VM's only NIC or said not why:\n%s", out)
	}
}
