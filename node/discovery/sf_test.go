package discovery_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// sfSpec is two ConnectX-6 Dx PFs on NUMA node 1 with 2 VFs and 2 mlx5
// scalable functions each, and an E810-C PF, which has none.
func sfSpec(name string) *virtualnode.Spec {
	return &virtualnode.Spec{Name: name, PFs: []virtualnode.PFSpec{
		{Model: "ConnectX-6 Dx", Count: 2, VFs: 2, SFs: 2, NUMA: []int{1}},
		{Model: "E810-C", VFs: 1},
	}}
}

// sfPF is the first ConnectX-6 Dx of sfSpec.
const sfPF = "0000:3b:00.0"

// TestDiscoverSFs: each PF lists its SFs, in sfnum order, with the
// auxiliary type sriovdp's auxTypes matches, the PF's NUMA node, and the
// netdev and RDMA device below each; SFs are no PCI functions.
func TestDiscoverSFs(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, sfSpec("sfs"))
	inv := discover(t, db, node, discovery.Options{})
	if inv.Len() != len(node.Devices()) || len(inv.Problems) != 0 {
		t.Errorf("inventory has %d functions and problems %q, want the %d PCI functions and none", inv.Len(), inv.Problems, len(node.Devices()))
	}
	sfs := 0
	for _, built := range node.Devices() {
		if built.SRIOV == nil {
			continue
		}
		pf := findPF(t, inv, built.Addr)
		if len(pf.SFs) != len(built.SFs) || len(pf.Problems) != 0 || len(pf.VFs) != built.SRIOV.NumVFs {
			t.Errorf("%s: %d SFs, %d VFs, problems %q, want %d SFs, %d VFs, none", pf.Address, len(pf.SFs), len(pf.VFs), pf.Problems, len(built.SFs), built.SRIOV.NumVFs)
			continue
		}
		for i := range pf.SFs {
			checkSF(t, node.DevRoot(), &pf.SFs[i], built.SFs[i], built.NUMA)
			if _, ok := inv.Function(pf.SFs[i].Name); ok {
				t.Errorf("%s: Inventory.Function finds SF %s, which is no PCI function", pf.Address, pf.SFs[i].Name)
			}
			sfs++
		}
	}
	if sfs != 4 {
		t.Errorf("found %d SFs, want 4", sfs)
	}
}

// checkSF compares a discovered SF with the one the node built.
func checkSF(t *testing.T, devRoot string, got *discovery.SF, want *virtualnode.SF, numa int) {
	t.Helper()
	if got.Name != want.Name || got.AuxType != "sf" || got.SFNum != want.Num || got.Driver != "mlx5_core.sf" ||
		got.NUMANode != numa || len(got.Problems) != 0 || len(got.Excluded) != 0 {
		t.Errorf("SF %+v, want %s, aux type sf, sfnum %d, driver mlx5_core.sf, NUMA node %d, no problem or exclusion",
			got, want.Name, want.Num, numa)
	}
	if nd := got.Netdev; nd == nil || nd.Name != want.Netdev.Name || nd.HardwareAddr != want.Netdev.Address ||
		nd.Ifindex != want.Netdev.Index || nd.MTU != want.Netdev.MTU || nd.OperState != "up" || !nd.Up {
		t.Errorf("%s: netdev %+v, want %+v", want.Name, got.Netdev, want.Netdev)
	}
	if got.RDMA == nil || got.RDMA.Device != want.RDMA.Name || got.RDMA.NodeGUID != bytesGUID(want.RDMA.NodeGUID) {
		t.Fatalf("%s: RDMA %+v, want %s with node GUID %s", want.Name, got.RDMA, want.RDMA.Name, want.RDMA.NodeGUID)
	}
	var kinds []string
	for _, p := range got.RDMA.CharDevices {
		if filepath.Dir(p) != filepath.Join(devRoot, "infiniband") {
			t.Errorf("%s: RDMA char device %s is not under %s/infiniband", want.Name, p, devRoot)
		}
		kinds = append(kinds, filepath.Base(p))
	}
	if w := []string{"uverbs", "umad", "issm"}; len(kinds) != 4 || !strings.HasPrefix(kinds[0], w[0]) ||
		!strings.HasPrefix(kinds[1], w[1]) || !strings.HasPrefix(kinds[2], w[2]) || kinds[3] != "rdma_cm" {
		t.Errorf("%s: RDMA char devices %q, want uverbsN, umadN, issmN and rdma_cm", want.Name, kinds)
	}
}

// TestInventoryJSONKeepsSFs: an inventory read back from JSON has the
// PFs' SFs; a PF without SFs says nothing of them.
func TestInventoryJSONKeepsSFs(t *testing.T) {
	db := vnodetest.OpenDB(t)
	inv := discover(t, db, buildTree(t, db, sfSpec("sfs-json")), discovery.Options{})
	data, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var back discovery.Inventory
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.PFs, inv.PFs) {
		t.Errorf("PFs read back differ from those discovered")
	}
	if n := strings.Count(string(data), `"sfs":`); n != 2 {
		t.Errorf("inventory JSON has %d \"sfs\" lists, want one per ConnectX-6 Dx", n)
	}
	if !strings.Contains(string(data), `"auxType":"sf"`) || !strings.Contains(string(data), `"sfNum":88`) {
		t.Errorf("inventory JSON %s lacks auxType and sfNum", data)
	}
}

// TestDiscoverMalformedSFs breaks one thing at a time in a tree with SFs:
// discovery keeps the SF, says what is wrong on it, and goes on.
func TestDiscoverMalformedSFs(t *testing.T) {
	sf0 := func(sys string, elem ...string) string {
		return filepath.Join(append([]string{sys, "bus/auxiliary/devices/mlx5_core.sf.0"}, elem...)...)
	}
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, sys string)
		check   func(t *testing.T, pf *discovery.PF)
	}{{
		name:    "sfnum not a number",
		breakIt: func(t *testing.T, sys string) { writeFile(t, sf0(sys, "sfnum"), "banana\n") },
		check: func(t *testing.T, pf *discovery.PF) {
			sf := sfNamed(t, pf, "mlx5_core.sf.0")
			if sf.SFNum != -1 || !slices.ContainsFunc(sf.Problems, func(p string) bool {
				return strings.Contains(p, "mlx5_core.sf.0/sfnum") && strings.Contains(p, `"banana" is not a decimal number`)
			}) {
				t.Errorf("SF %+v, want sfnum -1 and a problem naming mlx5_core.sf.0/sfnum and \"banana\"", sf)
			}
			if sf.Netdev == nil || sf.RDMA == nil || pf.SFs[1].Name != "mlx5_core.sf.0" {
				t.Errorf("SFs %+v, want sf.0 still with netdev and RDMA device, sorted after sf.1 (sfnum 89)", pf.SFs)
			}
		},
	}, {
		name:    "driver unbound",
		breakIt: func(t *testing.T, sys string) { remove(t, sf0(sys, "driver")) },
		check: func(t *testing.T, pf *discovery.PF) {
			if sf := sfNamed(t, pf, "mlx5_core.sf.0"); sf.Driver != "" || !slices.Equal(sf.Excluded, []string{"no driver is bound"}) || len(sf.Problems) != 0 {
				t.Errorf("SF %+v, want no driver, excluded for it, no problem", sf)
			}
		},
	}, {
		name:    "no sfnum: an auxiliary device that is no SF",
		breakIt: func(t *testing.T, sys string) { remove(t, sf0(sys, "sfnum")) },
		check: func(t *testing.T, pf *discovery.PF) {
			if len(pf.SFs) != 1 || pf.SFs[0].Name != "mlx5_core.sf.1" || len(pf.Problems) != 0 {
				t.Errorf("SFs %+v problems %q, want only mlx5_core.sf.1 and no problem", pf.SFs, pf.Problems)
			}
		},
	}, {
		name:    "no auxiliary bus",
		breakIt: func(t *testing.T, sys string) { removeAll(t, filepath.Join(sys, "bus/auxiliary")) },
		check: func(t *testing.T, pf *discovery.PF) {
			if len(pf.SFs) != 0 || len(pf.Problems) != 0 {
				t.Errorf("SFs %+v problems %q, want none and no problem", pf.SFs, pf.Problems)
			}
		},
	}, {
		name:    "a PF without net/ does not take its SFs' netdevs",
		breakIt: func(t *testing.T, sys string) { removeAll(t, dev(sys, sfPF, "net")) },
		check: func(t *testing.T, pf *discovery.PF) {
			if pf.Netdev != nil || len(pf.Ports) != 0 || len(pf.SFs) != 2 || pf.SFs[0].Netdev == nil {
				t.Errorf("PF netdev %+v ports %+v SFs %+v, want no PF netdev and 2 SFs with theirs", pf.Netdev, pf.Ports, pf.SFs)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			db := vnodetest.OpenDB(t)
			node := buildTree(t, db, sfSpec("sfs-broken"))
			tc.breakIt(t, node.SysRoot())
			inv := discover(t, db, node, discovery.Options{})
			if len(inv.Problems) != 0 {
				t.Errorf("inventory problems %q, want none", inv.Problems)
			}
			tc.check(t, findPF(t, inv, sfPF))
		})
	}
}

func sfNamed(t *testing.T, pf *discovery.PF, name string) *discovery.SF {
	t.Helper()
	for i := range pf.SFs {
		if pf.SFs[i].Name == name {
			return &pf.SFs[i]
		}
	}
	t.Fatalf("%s has no SF %s: %+v", pf.Address, name, pf.SFs)
	return nil
}

// TestDiscoverRootSFs: on real links, an SF's netdev state comes from
// netlink like a VF's.
func TestDiscoverRootSFs(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := vnodetest.BuildForTest(t, sfSpec("disc-sfs"), db, true)
	inv := discover(t, db, node, discovery.Options{Netns: "/run/netns/" + node.NetnsName()})
	built, _ := node.Device(sfPF)
	pf := findPF(t, inv, sfPF)
	if len(pf.SFs) != len(built.SFs) {
		t.Fatalf("%d SFs, want %d", len(pf.SFs), len(built.SFs))
	}
	for i, sf := range pf.SFs {
		want := built.SFs[i].Netdev
		if nd := sf.Netdev; nd == nil || nd.StateFrom != "netlink" || nd.Ifindex != want.Index || nd.OperState != "up" || nd.Elsewhere {
			t.Errorf("%s: netdev %+v, want ifindex %d, up, state from netlink", sf.Name, sf.Netdev, want.Index)
		}
	}
}

// TestDiscoverSFRepresentors: on a switchdev PF each SF gets its
// representor, the netdev on the PF's switch whose port name is
// pf<P>sf<sfnum>; mlx5 registers those in the PF's own net/ too, where
// they are not taken for the PF's netdev.
func TestDiscoverSFRepresentors(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, sfSpec("sf-reps"))
	built, _ := node.Device(sfPF)
	sys := node.SysRoot()
	switchID := strings.TrimSpace(readFile(t, filepath.Join(sys, built.SysPath, "net", built.Netdev.Name, "phys_switch_id")))
	addSwitchPort(t, sys, built.SysPath+"/net", "eth9", switchID, "pf0sf90")
	inv := discover(t, db, node, discovery.Options{ESwitch: fakeESwitch{sfPF: discovery.ModeSwitchdev}})
	pf := findPF(t, inv, sfPF)
	if pf.Netdev == nil || pf.Netdev.Name != built.Netdev.Name || len(pf.Problems) != 0 {
		t.Errorf("PF netdev %+v problems %q, want the uplink %s and no problem", pf.Netdev, pf.Problems, built.Netdev.Name)
	}
	if len(pf.SFs) != len(built.SFs) {
		t.Fatalf("%d SFs, want %d", len(pf.SFs), len(built.SFs))
	}
	for i, sf := range pf.SFs {
		if want := built.SFs[i].Representor.Name; sf.Representor != want {
			t.Errorf("%s: representor %q, want %q", sf.Name, sf.Representor, want)
		}
	}
	for _, other := range inv.PFs {
		for _, sf := range other.SFs {
			if other.Address != sfPF && sf.Representor != "" {
				t.Errorf("%s on legacy PF %s: representor %q, want none", sf.Name, other.Address, sf.Representor)
			}
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
