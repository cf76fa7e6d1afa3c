package ctl_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// placements are where poolConfig puts functions of the default node:
// tags and pool, "-" for none.
var placements = []struct{ addr, tags, pool string }{
	{"0000:3b:00.0", "fabric-a", "-"}, // a PF with VFs is never pooled, its tags show
	{"0000:3b:01.0", "fabric-a", "intel.com/low"},
	{"0000:3b:01.5", "fabric-a", "intel.com/netdev"},
	{"0000:3b:01.6", "fabric-a", "intel.com/dpdk"},
	{"0000:3e:01.0", "-", "-"},
	{"0000:3e:01.7", "-", "intel.com/dpdk"},
	{"0000:41:01.2", "-", "nvidia.com/ib"},
	{"0000:43:00.0", "-", "-"},
}

// TestInventoryConfigTable: with --config every PF, VF and NIC row ends
// with the function's tags and pool.
func TestInventoryConfigTable(t *testing.T) {
	node := treeNode(t)
	code, out, errOut := run(t, inventoryArgs(node, "--config", writeConfig(t, "pools.yaml", poolConfig))...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, heading := range []string{"PF", "VF", "NIC"} {
		if fields := rowOf(out, heading); len(fields) < 2 || strings.Join(fields[len(fields)-2:], " ") != "TAGS POOL" {
			t.Errorf("%s heading %q does not end with TAGS POOL", heading, fields)
		}
	}
	for _, p := range placements {
		fields := rowOf(out, p.addr)
		if len(fields) < 2 || fields[len(fields)-2] != p.tags || fields[len(fields)-1] != p.pool {
			t.Errorf("row of %s is %q, want it to end with tags %s and pool %s", p.addr, fields, p.tags, p.pool)
		}
	}
	if strings.Contains(mustRun(t, inventoryArgs(node)...), "TAGS") {
		t.Error("the table without --config has a TAGS column")
	}
}

// rowOf returns the fields of the table row whose PF, VF or NIC address,
// or heading, is key: its first field, or second after a VF index.
func rowOf(out, key string) []string {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 1 && (f[0] == key || f[1] == key) {
			return f
		}
	}
	return nil
}

func openHWDB(t *testing.T) *hwdb.DB {
	t.Helper()
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, args...)
	if code != 0 {
		t.Fatalf("hwnetctl %q: exit %d: %s", args, code, errOut)
	}
	return out
}

// placedInventory is what json and yaml say of tags and pools.
type placedInventory struct {
	PFs []struct {
		placedFunction
		VFs []placedFunction
	}
	NICs []placedFunction
}

type placedFunction struct {
	PCIAddress string
	Tags       []string
	Pool       string
}

// TestInventoryConfigMachineOutput: json and yaml give each function its
// tags and pool, and stay readable as a discovery Inventory.
func TestInventoryConfigMachineOutput(t *testing.T) {
	node := treeNode(t)
	config := writeConfig(t, "pools.yaml", poolConfig)
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			data := []byte(mustRun(t, inventoryArgs(node, "--config", config, "-o", format)...))
			if format == "yaml" {
				var err error
				if data, err = yaml.YAMLToJSON(data); err != nil {
					t.Fatal(err)
				}
			}
			var placed placedInventory
			if err := json.Unmarshal(data, &placed); err != nil {
				t.Fatal(err)
			}
			got := map[string]placedFunction{}
			for _, pf := range placed.PFs {
				got[pf.PCIAddress] = pf.placedFunction
				for _, vf := range pf.VFs {
					got[vf.PCIAddress] = vf
				}
			}
			for _, n := range placed.NICs {
				got[n.PCIAddress] = n
			}
			for _, p := range placements {
				want := placedFunction{PCIAddress: p.addr, Pool: strings.Trim(p.pool, "-")}
				if p.tags != "-" {
					want.Tags = strings.Split(p.tags, ",")
				}
				if !reflect.DeepEqual(got[p.addr], want) {
					t.Errorf("%s: %+v, want %+v", p.addr, got[p.addr], want)
				}
			}
			var inv discovery.Inventory
			if err := json.Unmarshal(data, &inv); err != nil {
				t.Fatal(err)
			}
			checkInventory(t, node, &inv)
		})
	}
}

// TestInventoryJSONWithoutConfig: without --config, json is discovery's
// Inventory exactly, as scripts written before --config expect.
func TestInventoryJSONWithoutConfig(t *testing.T) {
	node := treeNode(t)
	out := mustRun(t, inventoryArgs(node, "-o", "json")...)
	inv, err := discovery.Discover(t.Context(), discovery.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(), DB: openHWDB(t)})
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(inv); err != nil {
		t.Fatal(err)
	}
	if out != want.String() {
		t.Errorf("json output differs from the Inventory's encoding:\n%s\nwant:\n%s", out, want.String())
	}
}

// TestInventoryConfigErrors: a config that cannot be read, parsed or
// checked against the hardware database fails, naming the flag and what
// is wrong.
func TestInventoryConfigErrors(t *testing.T) {
	node := treeNode(t)
	badConfig := writeConfig(t, "bad.yaml", "resourceList:\n  - {resourceName: a, selectors: {pfNames: [\"enp59s0f0#3-1\"]}}\n")
	modelConfig := writeConfig(t, "model.yaml", "resourceList:\n  - {resourceName: a, selectors: {models: [I350-T4]}}\n")
	for _, tc := range []struct {
		config, inStderr string
	}{
		{"/nonexistent.yaml", "--config: open /nonexistent.yaml"},
		{badConfig, "--config: config " + badConfig + `: resourceList[0] "a": selectors.pfNames[0]: "enp59s0f0#3-1": range 3-1 is reversed`},
		{modelConfig, "--config: config " + modelConfig + `: resourceList[0] "a": selectors.models[0]: "I350-T4": not a model in the hardware database`},
	} {
		code, out, errOut := run(t, inventoryArgs(node, "--config", tc.config)...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.inStderr) {
			t.Errorf("--config %s: exit %d, stdout %q, stderr %q; want exit 1, nothing and %q", tc.config, code, out, errOut, tc.inStderr)
		}
	}
}

// TestInventoryTableDeviceNodes: the DEVICE column names every node a pod
// would get: a UIO VF's /dev/uioN, an RDMA VF's verbs, MAD and rdma_cm.
func TestInventoryTableDeviceNodes(t *testing.T) {
	node := treeNode(t)
	if err := node.BindDriver(t.Context(), "0000:3e:01.5", "uio_pci_generic"); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, inventoryArgs(node)...)
	ib := node.DevRoot() + "/infiniband/"
	for addr, want := range map[string]string{
		"0000:3e:01.5": node.DevRoot() + "/uio0",
		"0000:41:01.0": ib + "uverbs1," + ib + "umad1," + ib + "issm1," + ib + "rdma_cm",
	} {
		if fields := rowOf(out, addr); len(fields) == 0 || fields[len(fields)-1] != want {
			t.Errorf("row of %s is %q, want DEVICE %s", addr, fields, want)
		}
	}
}

// mlx4Node builds a node with one dual-port ConnectX-3 function (ib0 and
// ib0d1) and a pools file putting each port in a pool of its own.
func mlx4Node(t *testing.T) (*virtualnode.Node, string) {
	t.Helper()
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	node := vnodetest.BuildForTest(t, &virtualnode.Spec{Name: "mlx4", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-3", LinkType: "infiniband", Names: []string{"ib0"}, DualPort: true},
	}}, db, false)
	return node, writeConfig(t, "pools.yaml", `
resourceList:
  - {resourceName: first, selectors: {pfNames: [ib0]}}
  - {resourceName: second, selectors: {pfNames: [ib0d1]}}
`)
}

// TestInventoryTableMlx4Ports: the table lists both ports of an mlx4
// function, and the pools each port is in.
func TestInventoryTableMlx4Ports(t *testing.T) {
	node, config := mlx4Node(t)
	out := mustRun(t, inventoryArgs(node, "--config", config)...)
	fields := rowOf(out, "0000:3b:00.0")
	if !slices.Contains(fields, "ib0,ib0d1") || len(fields) == 0 || fields[len(fields)-1] != "intel.com/first,intel.com/second" {
		t.Errorf("row of the mlx4 PF is %q, want netdevs ib0,ib0d1 and pools intel.com/first,intel.com/second", fields)
	}
}

// TestInventoryTableSFs: a PF's scalable functions are listed under it,
// each with its sfnum, netdev, RDMA device and, with a config, the
// auxNetDevice pool that takes it.
func TestInventoryTableSFs(t *testing.T) {
	node := vnodetest.BuildForTest(t, &virtualnode.Spec{Name: "sfs", PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-6 Dx", SFs: 2, Names: []string{"p0"}},
	}}, openHWDB(t), false)
	config := writeConfig(t, "pools.yaml", `resourceList: [{resourceName: sf, resourcePrefix: nvidia.com, deviceType: auxNetDevice, selectors: {auxTypes: [sf]}}]`)
	out := mustRun(t, inventoryArgs(node, "--config", config)...)
	var sfs [][]string
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 1 && strings.HasPrefix(f[1], "mlx5_core.sf.") {
			sfs = append(sfs, f)
		}
	}
	if len(sfs) != 2 || sfs[0][0] != "88" || sfs[0][len(sfs[0])-1] != "nvidia.com/sf" || !slices.ContainsFunc(sfs[0], func(s string) bool { return strings.HasPrefix(s, "mlx5_") && !strings.HasPrefix(s, "mlx5_core") }) {
		t.Errorf("SF rows %q, want two, from sfnum 88, with an RDMA device and the pool\n%s", sfs, out)
	}
}
