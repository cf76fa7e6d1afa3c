package hwdb

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestBuiltinModelsAreValid(t *testing.T) {
	models := builtinModels()
	if err := validateModels("builtin", models); err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		guest := m.PFDevice == m.VFDevice // a VM's NIC: it enables no VFs
		if m.VFDevice == 0 || (m.MaxVFs == 0) != guest || len(m.LinkTypes) == 0 || m.DPDK == "" ||
			len(m.PFDrivers) == 0 || len(m.VFDrivers) == 0 || m.Family == "" {
			t.Errorf("built-in model %q leaves a field empty: %+v", m.Name, m)
		}
	}
}

// newerThanPCIIDs lists the built-in IDs that the embedded pci.ids
// (2023.04.10) does not name, because the parts came later. Each was
// confirmed in the driver's kernel PCI ID table and, where noted, in the PCI
// ID Project's current pci.ids instead. When data/pci.ids is regenerated
// from a newer pci.ids, TestBuiltinIDsHaveNames says which to remove.
var newerThanPCIIDs = map[[2]PCIID]string{
	{0x8086, 0x12d1}: "E830-CC backplane: ice_devids.h, pci.ids",
	{0x8086, 0x12d2}: "E830-CC QSFP: ice_devids.h, pci.ids, sriov-network-operator",
	{0x8086, 0x12d3}: "E830-CC SFP: ice_devids.h, pci.ids, sriov-network-operator",
	{0x15b3, 0x1025}: "ConnectX-9: mlx5_core_pci_table, pci.ids",
	{0x14e4, 0x1760}: "BCM57608: bnxt_pci_tbl, pci.ids",
	{0x14e4, 0x1761}: "BCM57604: bnxt_pci_tbl",
	{0x14e4, 0x1762}: "BCM57602: bnxt_pci_tbl",
	{0x14e4, 0x1763}: "BCM57601: bnxt_pci_tbl",
	{0x14e4, 0x1819}: "BCM5760x VF (NETXTREME_E_P7_VF): bnxt_pci_tbl, pci.ids",
	{0x8086, 0x1249}: "E835-CC QSFP: ice_devids.h",
	{0x8086, 0x124a}: "E835-CC SFP: ice_devids.h",
	{0x177d, 0xb100}: "OCTEON TX2 CN98XX: octeon_ep, sriov-network-operator",
	{0x177d, 0xb103}: "OCTEON TX2 CN98XX VF: octeon_ep_vf, sriov-network-operator",
	{0x177d, 0xb200}: "OCTEON TX2 CN96XX: octeon_ep, sriov-network-operator",
	{0x177d, 0xb203}: "OCTEON TX2 CN96XX VF: octeon_ep_vf, sriov-network-operator",
	{0x177d, 0xb600}: "OCTEON Fusion CNF95XX: sriov-network-operator",
	{0x177d, 0xb603}: "OCTEON Fusion CNF95XX VF: sriov-network-operator",
	{0x177d, 0xb900}: "OCTEON 10 CN10XXX: octeon_ep, sriov-network-operator",
	{0x177d, 0xb903}: "OCTEON 10 CN10XXX VF: octeon_ep_vf, sriov-network-operator",
	{0x177d, 0xba00}: "OCTEON Fusion CNF105XX: octeon_ep, sriov-network-operator",
	{0x177d, 0xba03}: "OCTEON Fusion CNF105XX VF: octeon_ep_vf, sriov-network-operator",
}

// TestBuiltinIDsHaveNames checks every built-in vendor, PF and VF ID against
// pci.ids, so a mistyped ID fails here.
func TestBuiltinIDsHaveNames(t *testing.T) {
	db := openDB(t)
	used := map[[2]PCIID]bool{}
	for _, m := range builtinModels() {
		if db.VendorName(m.Vendor) == "" {
			t.Errorf("%s: vendor %v is not in pci.ids", m.Name, m.Vendor)
		}
		for _, id := range []PCIID{m.PFDevice, m.VFDevice} {
			key := [2]PCIID{m.Vendor, id}
			used[key] = true
			_, newer := newerThanPCIIDs[key]
			switch named := db.DeviceName(m.Vendor, id) != ""; {
			case !named && !newer:
				t.Errorf("%s: %v:%v is not in pci.ids", m.Name, m.Vendor, id)
			case named && newer:
				t.Errorf("%s: %v:%v is in pci.ids now; remove it from newerThanPCIIDs", m.Name, m.Vendor, id)
			}
		}
	}
	for key, why := range newerThanPCIIDs {
		if !used[key] {
			t.Errorf("newerThanPCIIDs lists %v:%v (%s), which no built-in model uses", key[0], key[1], why)
		}
	}
}

// TestBuiltinFamilies pins what each vendor's parts can do, as a user
// choosing a NIC would read it.
func TestBuiltinFamilies(t *testing.T) {
	tests := []struct {
		name                  string
		vendor, pf, vf        PCIID
		maxVFs                int
		pfDriver, vfDriver    string
		rdma, switchdev, vdpa bool
		dpdk                  DPDKBinding
		links                 []LinkType
	}{
		{"82599 SFP+", 0x8086, 0x10fb, 0x10ed, 63, "ixgbe", "ixgbevf", false, false, false, VFIO, []LinkType{Ethernet}},
		{"X540", 0x8086, 0x1528, 0x1515, 63, "ixgbe", "ixgbevf", false, false, false, VFIO, []LinkType{Ethernet}},
		{"X550", 0x8086, 0x1563, 0x1565, 63, "ixgbe", "ixgbevf", false, false, false, VFIO, []LinkType{Ethernet}},
		{"XL710 QSFP+", 0x8086, 0x1583, 0x154c, 128, "i40e", "iavf", false, false, false, VFIO, []LinkType{Ethernet}},
		{"XXV710 SFP28", 0x8086, 0x158b, 0x154c, 128, "i40e", "iavf", false, false, false, VFIO, []LinkType{Ethernet}},
		{"X722 SFP+", 0x8086, 0x37d0, 0x37cd, 128, "i40e", "iavf", false, false, false, VFIO, []LinkType{Ethernet}},
		{"E810-C", 0x8086, 0x1592, 0x1889, 256, "ice", "iavf", false, true, false, VFIO, []LinkType{Ethernet}},
		{"E810-XXV SFP", 0x8086, 0x159b, 0x1889, 256, "ice", "iavf", false, true, false, VFIO, []LinkType{Ethernet}},
		{"E830-CC QSFP", 0x8086, 0x12d2, 0x1889, 256, "ice", "iavf", false, true, false, VFIO, []LinkType{Ethernet}},
		{"ConnectX-4", 0x15b3, 0x1013, 0x1014, 127, "mlx5_core", "mlx5_core", true, false, false, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"ConnectX-4 Lx", 0x15b3, 0x1015, 0x1016, 127, "mlx5_core", "mlx5_core", true, true, false, Bifurcated, []LinkType{Ethernet}},
		{"ConnectX-5", 0x15b3, 0x1017, 0x1018, 127, "mlx5_core", "mlx5_core", true, true, false, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"ConnectX-5 Ex", 0x15b3, 0x1019, 0x101a, 127, "mlx5_core", "mlx5_core", true, true, false, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"ConnectX-6", 0x15b3, 0x101b, 0x101c, 127, "mlx5_core", "mlx5_core", true, true, false, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"ConnectX-6 Dx", 0x15b3, 0x101d, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{Ethernet}},
		{"ConnectX-6 Lx", 0x15b3, 0x101f, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{Ethernet}},
		{"ConnectX-7", 0x15b3, 0x1021, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"ConnectX-8", 0x15b3, 0x1023, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"ConnectX-9", 0x15b3, 0x1025, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{InfiniBand, Ethernet}},
		{"BlueField-2", 0x15b3, 0xa2d6, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{Ethernet, InfiniBand}},
		{"BlueField-3", 0x15b3, 0xa2dc, 0x101e, 127, "mlx5_core", "mlx5_core", true, true, true, Bifurcated, []LinkType{Ethernet, InfiniBand}},
		{"BCM57414", 0x14e4, 0x16d7, 0x16dc, 128, "bnxt_en", "bnxt_en", true, true, false, VFIO, []LinkType{Ethernet}},
		{"BCM57508", 0x14e4, 0x1750, 0x1806, 128, "bnxt_en", "bnxt_en", true, true, false, VFIO, []LinkType{Ethernet}},
		{"BCM57608", 0x14e4, 0x1760, 0x1819, 128, "bnxt_en", "bnxt_en", true, true, false, VFIO, []LinkType{Ethernet}},
		{"QL41000", 0x1077, 0x8070, 0x8090, 192, "qede", "qede", false, false, false, VFIO, []LinkType{Ethernet}},
		{"QL45000 50GbE", 0x1077, 0x1654, 0x1664, 120, "qede", "qede", false, false, false, VFIO, []LinkType{Ethernet}},
	}
	db := openDB(t)
	for _, tt := range tests {
		m, ok := db.ModelByName(tt.name)
		if !ok {
			t.Errorf("no built-in model %q", tt.name)
			continue
		}
		got := fmt.Sprintf("%v:%v/%v maxVFs=%d %s/%s rdma=%t switchdev=%t vdpa=%t %s %v",
			m.Vendor, m.PFDevice, m.VFDevice, m.MaxVFs, m.PFDrivers[0], m.VFDrivers[0], m.RDMA, m.Switchdev, m.VDPA, m.DPDK, m.LinkTypes)
		want := fmt.Sprintf("%v:%v/%v maxVFs=%d %s/%s rdma=%t switchdev=%t vdpa=%t %s %v",
			tt.vendor, tt.pf, tt.vf, tt.maxVFs, tt.pfDriver, tt.vfDriver, tt.rdma, tt.switchdev, tt.vdpa, tt.dpdk, tt.links)
		if got != want {
			t.Errorf("%s:\n got  %s\n want %s", tt.name, got, want)
		}
	}
}

// TestBuiltinCoversSRIOVOperatorList holds the curated table against the
// SR-IOV operator's supported-nic-ids: a NIC the operator supports gets a
// model name here, with the same VF ID, so no user moving from the operator
// finds a supported card unnamed; and the models users found unnamed:
// I350, ConnectX-3 and ConnectX-3 Pro, which the operator leaves out.
func TestBuiltinCoversSRIOVOperatorList(t *testing.T) {
	db := openDB(t)
	data, err := os.ReadFile("testdata/sriov-operator-supported-nic-ids.txt")
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Split(strings.TrimSpace(string(data)), "\n")
	entries = append(entries, "Intel_I350 8086 1521 1520", "Nvidia_ConnectX-3 15b3 1003 1004", "Nvidia_ConnectX-3_Pro 15b3 1007 1004")
	for _, line := range entries {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		ids := make([]PCIID, 3)
		for i, s := range f[1:4] {
			if ids[i], err = ParsePCIID(s); err != nil {
				t.Fatalf("%s: %v", f[0], err)
			}
		}
		m, ok := db.ModelByPF(ids[0], ids[1])
		switch {
		case !ok:
			t.Errorf("%s (%v:%v) has no model", f[0], ids[0], ids[1])
		case m.VFDevice != ids[2]:
			t.Errorf("%s: model %q has VF %v, the operator says %v", f[0], m.Name, m.VFDevice, ids[2])
		}
	}
}

// TestBuiltinSFs pins which models carry mlx5 scalable functions and how
// many per PF, and holds every model with SFs to what creating one needs:
// mlx5_core, which makes them auxiliary devices, and a switchdev eswitch,
// whose devlink ports they are added as.
func TestBuiltinSFs(t *testing.T) {
	tests := []struct {
		name   string
		maxSFs int
	}{
		{"ConnectX-5", 0},
		{"ConnectX-6", 0},
		{"ConnectX-6 Dx", 252},
		{"ConnectX-7", 252},
		{"BlueField-2", 500},
		{"BlueField-3", 1000},
		{"E810-C", 0},
		{"BCM57508", 0},
	}
	db := openDB(t)
	for _, tt := range tests {
		m, ok := db.ModelByName(tt.name)
		if !ok {
			t.Errorf("no built-in model %q", tt.name)
			continue
		}
		if m.MaxSFs != tt.maxSFs {
			t.Errorf("%s: maxSFs %d, want %d", tt.name, m.MaxSFs, tt.maxSFs)
		}
	}
	for _, m := range builtinModels() {
		if m.MaxSFs > 0 && (m.PFDrivers[0] != "mlx5_core" || !m.Switchdev) {
			t.Errorf("%s has %d SFs but driver %s, switchdev %t: SFs need mlx5_core and switchdev", m.Name, m.MaxSFs, m.PFDrivers[0], m.Switchdev)
		}
	}
}
