package hwdb

import "slices"

// PCI vendor IDs of the built-in models.
const (
	vendorIntel    PCIID = 0x8086
	vendorNVIDIA   PCIID = 0x15b3 // Mellanox Technologies in pci.ids
	vendorBroadcom PCIID = 0x14e4
	vendorQLogic   PCIID = 0x1077 // Marvell's FastLinQ line
	vendorCavium   PCIID = 0x177d // Marvell's OCTEON line
	vendorRedHat   PCIID = 0x1af4 // virtio
	vendorAmazon   PCIID = 0x1d0f
)

// builtinModels returns the curated SR-IOV table, one model per PF device
// ID. Every ID is checked against pci.ids by TestBuiltinIDsHaveNames and
// appears in the kernel driver's PCI ID table; the per-family constructors
// below say where each family's limits and capabilities come from.
func builtinModels() []Model {
	return slices.Concat(intelModels(), nvidiaModels(), broadcomModels(), qlogicModels(), marvellModels(), guestModels())
}

func intelModels() []Model {
	return []Model{
		ixgbe("82599 SFP+", "Intel 82599", 0x10fb, 0x10ed),
		ixgbe("82599 backplane", "Intel 82599", 0x10f8, 0x10ed),
		ixgbe("82599 10GBASE-T", "Intel 82599", 0x151c, 0x10ed),
		ixgbe("82599EN SFP+", "Intel 82599", 0x1557, 0x10ed),
		ixgbe("X540", "Intel X540", 0x1528, 0x1515),
		ixgbe("X540-T1", "Intel X540", 0x1560, 0x1515),
		// 1565 is the X550 VF on bare metal; 1564 is its Hyper-V flavour.
		ixgbe("X550", "Intel X550", 0x1563, 0x1565),
		ixgbe("X550-T1", "Intel X550", 0x15d1, 0x1565),
		igb("I350", "Intel I350", 0x1521, 0x1520),
		igb("82576", "Intel 82576", 0x10c9, 0x10ca),

		i40e("X710 SFP+", "Intel X710", 0x1572, 0x154c),
		i40e("X710 backplane", "Intel X710", 0x1581, 0x154c),
		i40e("X710 QSFP+", "Intel X710", 0x1585, 0x154c),
		i40e("X710 10GBASE-T", "Intel X710", 0x15ff, 0x154c),
		i40e("X710/X557-AT 10GBASE-T", "Intel X710", 0x1589, 0x154c),
		i40e("XL710 QSFP+", "Intel X710", 0x1583, 0x154c),
		i40e("XL710 backplane", "Intel X710", 0x1580, 0x154c),
		i40e("XXV710 SFP28", "Intel X710", 0x158b, 0x154c),
		i40e("XXV710 backplane", "Intel X710", 0x158a, 0x154c),
		// The XXV710 inside the FPGA Programmable Acceleration Card N3000.
		i40e("XXV710 N3000", "Intel X710", 0x0d58, 0x154c),
		i40e("X722 SFP+", "Intel X722", 0x37d0, 0x37cd),
		i40e("X722 backplane", "Intel X722", 0x37ce, 0x37cd),
		i40e("X722 QSFP+", "Intel X722", 0x37cf, 0x37cd),
		i40e("X722 10GBASE-T", "Intel X722", 0x37d2, 0x37cd),

		// The QSFP part keeps the plain name "E810-C" that other packages
		// already look up. RDMA stays false: irdma serves the E810 PF, but
		// upstream iavf gives its VFs no RDMA device.
		ice(Model{Name: "E810-C", Family: "Intel E810", PFDevice: 0x1592}),
		ice(Model{Name: "E810-C backplane", Family: "Intel E810", PFDevice: 0x1591}),
		ice(Model{Name: "E810-C SFP", Family: "Intel E810", PFDevice: 0x1593}),
		ice(Model{Name: "E810-XXV backplane", Family: "Intel E810", PFDevice: 0x1599}),
		ice(Model{Name: "E810-XXV QSFP", Family: "Intel E810", PFDevice: 0x159a}),
		ice(Model{Name: "E810-XXV SFP", Family: "Intel E810", PFDevice: 0x159b}),
		ice(Model{Name: "E823-C backplane", Family: "Intel E823", PFDevice: 0x188a}),
		ice(Model{Name: "E823-C QSFP", Family: "Intel E823", PFDevice: 0x188b}),
		ice(Model{Name: "E823-C SFP", Family: "Intel E823", PFDevice: 0x188c}),
		ice(Model{Name: "E823-L backplane", Family: "Intel E823", PFDevice: 0x124c}),
		ice(Model{Name: "E823-L SFP", Family: "Intel E823", PFDevice: 0x124d}),
		ice(Model{Name: "E823-L QSFP", Family: "Intel E823", PFDevice: 0x151d}),
		ice(Model{Name: "E822-C backplane", Family: "Intel E822", PFDevice: 0x1890}),
		ice(Model{Name: "E822-C QSFP", Family: "Intel E822", PFDevice: 0x1891}),
		ice(Model{Name: "E822-C SFP", Family: "Intel E822", PFDevice: 0x1892}),
		ice(Model{Name: "E822-L backplane", Family: "Intel E822", PFDevice: 0x1897}),
		ice(Model{Name: "E822-L SFP", Family: "Intel E822", PFDevice: 0x1898}),
		ice(Model{Name: "E825-C backplane", Family: "Intel E825", PFDevice: 0x579c}),
		ice(Model{Name: "E825-C QSFP", Family: "Intel E825", PFDevice: 0x579d}),
		ice(Model{Name: "E825-C SFP", Family: "Intel E825", PFDevice: 0x579e}),
		// Newer than the 2023 pci.ids; IDs from the kernel's ice_devids.h,
		// the PCI ID Project's current pci.ids and sriov-network-operator's
		// supported-nic-ids.
		ice(Model{Name: "E830-CC backplane", Family: "Intel E830", PFDevice: 0x12d1}),
		ice(Model{Name: "E830-CC QSFP", Family: "Intel E830", PFDevice: 0x12d2}),
		ice(Model{Name: "E830-CC SFP", Family: "Intel E830", PFDevice: 0x12d3}),
		ice(Model{Name: "E835-CC QSFP", Family: "Intel E835", PFDevice: 0x1249}),
		ice(Model{Name: "E835-CC SFP", Family: "Intel E835", PFDevice: 0x124a}),
	}
}

// igb returns an Intel 1GbE model. igb enables at most 7 VFs per PF
// (max_vfs, igb_main.c); igbvf drives them, without DPDK's vfio support
// being any different from the 10GbE parts'.
func igb(name, family string, pf, vf PCIID) Model {
	return Model{
		Name: name, Family: family, Vendor: vendorIntel, PFDevice: pf, VFDevice: vf,
		PFDrivers: []string{"igb"}, VFDrivers: []string{"igbvf"}, MaxVFs: 7,
		LinkTypes: []LinkType{Ethernet}, DPDK: VFIO,
	}
}

// ixgbe returns an Intel 10GbE model of the 82599/X540/X550 line. The ixgbe
// driver enables at most 63 VFs per PF (IXGBE_MAX_VFS_DRV_LIMIT,
// ixgbe_sriov.h).
func ixgbe(name, family string, pf, vf PCIID) Model {
	return Model{
		Name: name, Family: family, Vendor: vendorIntel, PFDevice: pf, VFDevice: vf,
		PFDrivers: []string{"ixgbe"}, VFDrivers: []string{"ixgbevf"}, MaxVFs: 63,
		LinkTypes: []LinkType{Ethernet}, DPDK: VFIO,
	}
}

// i40e returns an Intel 700 Series model. i40e caps a PF at 128 VFs
// (I40E_MAX_VF_COUNT, i40e_main.c); the NVM may give a PF fewer. iavf VFs
// have no RDMA, and i40e has no switchdev mode.
func i40e(name, family string, pf, vf PCIID) Model {
	return Model{
		Name: name, Family: family, Vendor: vendorIntel, PFDevice: pf, VFDevice: vf,
		PFDrivers: []string{"i40e"}, VFDrivers: []string{"iavf"}, MaxVFs: 128,
		LinkTypes: []LinkType{Ethernet}, DPDK: VFIO,
	}
}

// ice completes an Intel 800 Series model. Its VFs are the Adaptive VF,
// 1889; ice supports up to 256 VFs (ICE_MAX_SRIOV_VFS, ice_vf_lib.h) and a
// switchdev eswitch.
func ice(m Model) Model {
	m.Vendor, m.VFDevice = vendorIntel, 0x1889
	m.PFDrivers, m.VFDrivers, m.MaxVFs = []string{"ice"}, []string{"iavf"}, 256
	m.LinkTypes, m.Switchdev, m.DPDK = []LinkType{Ethernet}, true, VFIO
	return m
}

// mlx5VF is the generic VF ID of every mlx5 part from ConnectX-6 Dx on
// ("ConnectX Family mlx5Gen Virtual Function").
const mlx5VF PCIID = 0x101e

func nvidiaModels() []Model {
	// One PCI ID covers a part's Ethernet-only and VPI cards, so VPI parts
	// list both link layers; BlueField DPUs default to Ethernet.
	vpi := []LinkType{InfiniBand, Ethernet}
	eth := []LinkType{Ethernet}
	dpu := []LinkType{Ethernet, InfiniBand}
	return []Model{
		mlx4(Model{Name: "ConnectX-3", PFDevice: 0x1003, LinkTypes: vpi}),
		mlx4(Model{Name: "ConnectX-3 Pro", PFDevice: 0x1007, LinkTypes: vpi}),
		// ASAP² switchdev offload starts with ConnectX-4 Lx.
		mlx5(Model{Name: "ConnectX-4", PFDevice: 0x1013, VFDevice: 0x1014, LinkTypes: vpi}),
		mlx5(Model{Name: "ConnectX-4 Lx", PFDevice: 0x1015, VFDevice: 0x1016, LinkTypes: eth, Switchdev: true}),
		mlx5(Model{Name: "ConnectX-5", PFDevice: 0x1017, VFDevice: 0x1018, LinkTypes: vpi, Switchdev: true}),
		mlx5(Model{Name: "ConnectX-5 Ex", PFDevice: 0x1019, VFDevice: 0x101a, LinkTypes: vpi, Switchdev: true}),
		mlx5(Model{Name: "ConnectX-6", PFDevice: 0x101b, VFDevice: 0x101c, LinkTypes: vpi, Switchdev: true}),
		// mlx5_vdpa needs ConnectX-6 Dx or newer, as do scalable functions
		// (MaxSFs: the PF_TOTAL_SF that NVIDIA's scalablefunctions wiki
		// configures, 252 on a ConnectX-6 Dx, 500 on a BlueField-2's
		// eswitch PF, 1000 on a BlueField-3's host PF; ConnectX-7 is
		// given ConnectX-6 Dx's, as no figure of its own was found).
		// ConnectX-6 Lx, -8 and -9 stay without SFs until a source says
		// how many they carry.
		mlx5(Model{Name: "ConnectX-6 Dx", PFDevice: 0x101d, VFDevice: mlx5VF, LinkTypes: eth, Switchdev: true, VDPA: true, MaxSFs: 252}),
		mlx5(Model{Name: "ConnectX-6 Lx", PFDevice: 0x101f, VFDevice: mlx5VF, LinkTypes: eth, Switchdev: true, VDPA: true}),
		mlx5(Model{Name: "ConnectX-7", PFDevice: 0x1021, VFDevice: mlx5VF, LinkTypes: vpi, Switchdev: true, VDPA: true, MaxSFs: 252}),
		mlx5(Model{Name: "ConnectX-8", PFDevice: 0x1023, VFDevice: mlx5VF, LinkTypes: vpi, Switchdev: true, VDPA: true}),
		// Newer than the 2023 pci.ids; 1025 is in the kernel's
		// mlx5_core_pci_table and the PCI ID Project's current pci.ids.
		mlx5(Model{Name: "ConnectX-9", PFDevice: 0x1025, VFDevice: mlx5VF, LinkTypes: vpi, Switchdev: true, VDPA: true}),
		mlx5(Model{Name: "BlueField-2", PFDevice: 0xa2d6, VFDevice: mlx5VF, LinkTypes: dpu, Switchdev: true, VDPA: true, MaxSFs: 500}),
		mlx5(Model{Name: "BlueField-3", PFDevice: 0xa2dc, VFDevice: mlx5VF, LinkTypes: dpu, Switchdev: true, VDPA: true, MaxSFs: 1000}),
	}
}

// mlx5 completes an NVIDIA ConnectX or BlueField model. mlx5_core drives PF
// and VF; every VF has RDMA, and DPDK shares it with the kernel. NVIDIA's
// SR-IOV guide gives ConnectX-4 onwards up to 127 VFs per PF.
func mlx5(m Model) Model {
	m.Family, m.Vendor = "NVIDIA "+m.Name, vendorNVIDIA
	m.PFDrivers, m.VFDrivers, m.MaxVFs = []string{"mlx5_core"}, []string{"mlx5_core"}, 127
	m.LinkTypes, m.RDMA, m.DPDK = slices.Clone(m.LinkTypes), true, Bifurcated
	return m
}

// mlx4 completes a ConnectX-3 model: mlx4_core drives PF and VF (1004
// for both models), mlx4_ib gives VFs RDMA, and mlx4 caps a PF at 126 VFs
// (MLX4_MAX_NUM_VF). There is no switchdev mode. PF and VFs report PCI
// class 0280, "Network controller" (lspci in the SR-IOV network device
// plugin's issue #260), not Ethernet or InfiniBand.
func mlx4(m Model) Model {
	m.Family, m.Vendor, m.VFDevice, m.Class = "NVIDIA "+m.Name, vendorNVIDIA, 0x1004, 0x0280
	m.PFDrivers, m.VFDrivers, m.MaxVFs = []string{"mlx4_core"}, []string{"mlx4_core"}, 126
	m.LinkTypes, m.RDMA, m.DPDK = slices.Clone(m.LinkTypes), true, Bifurcated
	return m
}

func broadcomModels() []Model {
	return []Model{
		// 16dc is the BCM5741x VF (BROADCOM_DEV_ID_5741X_VF in DPDK's bnxt).
		bnxt("BCM57412", "Broadcom BCM574xx", 0x16d6, 0x16dc),
		bnxt("BCM57414", "Broadcom BCM574xx", 0x16d7, 0x16dc),
		bnxt("BCM57416", "Broadcom BCM574xx", 0x16d8, 0x16dc),
		bnxt("BCM57417", "Broadcom BCM574xx", 0x16d9, 0x16dc),
		// 1806 is the BCM5750x Ethernet VF; its RDMA twin is 1807.
		bnxt("BCM57502", "Broadcom BCM575xx", 0x1752, 0x1806),
		bnxt("BCM57504", "Broadcom BCM575xx", 0x1751, 0x1806),
		bnxt("BCM57508", "Broadcom BCM575xx", 0x1750, 0x1806),
		// Newer than the 2023 pci.ids; IDs from the kernel's bnxt_pci_tbl
		// (1819 is NETXTREME_E_P7_VF) and, for 1760 and 1819, the PCI ID
		// Project's current pci.ids.
		bnxt("BCM57608", "Broadcom BCM576xx", 0x1760, 0x1819),
		bnxt("BCM57604", "Broadcom BCM576xx", 0x1761, 0x1819),
		bnxt("BCM57602", "Broadcom BCM576xx", 0x1762, 0x1819),
		bnxt("BCM57601", "Broadcom BCM576xx", 0x1763, 0x1819),
	}
}

// bnxt returns a Broadcom NetXtreme-E model. bnxt_en drives PF and VF,
// bnxt_re gives VFs RDMA, and bnxt_en's VF representors give a switchdev
// eswitch. bnxt_en enables at most 128 VFs per PF (BNXT_MAX_VFS, bnxt.h).
func bnxt(name, family string, pf, vf PCIID) Model {
	return Model{
		Name: name, Family: family, Vendor: vendorBroadcom, PFDevice: pf, VFDevice: vf,
		PFDrivers: []string{"bnxt_en"}, VFDrivers: []string{"bnxt_en"}, MaxVFs: 128,
		LinkTypes: []LinkType{Ethernet}, RDMA: true, Switchdev: true, DPDK: VFIO,
	}
}

func qlogicModels() []Model {
	// qed allows 192 VFs on a QL41000 (MAX_NUM_VFS_K2) and 120 on a
	// QL45000 (MAX_NUM_VFS_BB), per device; the NVRAM shares them among
	// the PFs, so one PF may get all of them.
	return []Model{
		qede("QL41000", "Marvell FastLinQ QL41000", 0x8070, 0x8090, 192),
		qede("QL45000 25GbE", "Marvell FastLinQ QL45000", 0x1656, 0x1664, 120),
		qede("QL45000 40GbE", "Marvell FastLinQ QL45000", 0x1634, 0x1664, 120),
		qede("QL45000 50GbE", "Marvell FastLinQ QL45000", 0x1654, 0x1664, 120),
		qede("QL45000 100GbE", "Marvell FastLinQ QL45000", 0x1644, 0x1664, 120),
	}
}

// qede returns a Marvell FastLinQ model; qede drives PF and VF.
func qede(name, family string, pf, vf PCIID, maxVFs int) Model {
	return Model{
		Name: name, Family: family, Vendor: vendorQLogic, PFDevice: pf, VFDevice: vf,
		PFDrivers: []string{"qede"}, VFDrivers: []string{"qede"}, MaxVFs: maxVFs,
		LinkTypes: []LinkType{Ethernet}, DPDK: VFIO,
	}
}

// marvellModels are the OCTEON SoCs in PCIe endpoint mode, the IDs the
// SR-IOV operator lists: octeon_ep drives the PF and octeon_ep_vf the VFs,
// whose ID is the PF's plus 3 (both drivers' PCI tables). The firmware sets
// sriov_totalvfs; 128 bounds what hwnet accepts.
func marvellModels() []Model {
	return []Model{
		octeon("OCTEON TX2 CN98XX", "Marvell OCTEON TX2", 0xb100),
		octeon("OCTEON TX2 CN96XX", "Marvell OCTEON TX2", 0xb200),
		octeon("OCTEON Fusion CNF95XX", "Marvell OCTEON Fusion", 0xb600),
		octeon("OCTEON 10 CN10XXX", "Marvell OCTEON 10", 0xb900),
		octeon("OCTEON Fusion CNF105XX", "Marvell OCTEON Fusion", 0xba00),
	}
}

func octeon(name, family string, pf PCIID) Model {
	return Model{
		Name: name, Family: family, Vendor: vendorCavium, PFDevice: pf, VFDevice: pf + 3,
		PFDrivers: []string{"octeon_ep"}, VFDrivers: []string{"octeon_ep_vf"}, MaxVFs: 128,
		LinkTypes: []LinkType{Ethernet}, DPDK: VFIO,
	}
}

// guestModels are the NICs a virtual machine sees, which the SR-IOV
// operator pools inside VMs: the function is itself the host's VF (or an
// emulated device), so PF and VF share one ID and the guest enables no
// VFs of its own (MaxVFs 0).
func guestModels() []Model {
	return []Model{
		guest("virtio-net (legacy)", "virtio", vendorRedHat, 0x1000, "virtio-pci"),
		guest("virtio-net", "virtio", vendorRedHat, 0x1041, "virtio-pci"),
		guest("ENA", "Amazon Elastic Network Adapter", vendorAmazon, 0xec20, "ena"),
	}
}

func guest(name, family string, vendor, id PCIID, driver string) Model {
	return Model{
		Name: name, Family: family, Vendor: vendor, PFDevice: id, VFDevice: id,
		PFDrivers: []string{driver}, VFDrivers: []string{driver},
		LinkTypes: []LinkType{Ethernet}, DPDK: VFIO,
	}
}
