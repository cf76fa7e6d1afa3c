package hwdb

// DB is an opened hardware database. It is safe for concurrent use.
type DB struct {
	// STUB: the hwdb implementation replaces this file.
	models []Model
}

// Open loads the embedded database and adds the admin's models, which take
// precedence over built-in ones with the same PF vendor and device ID.
func Open(extra ...Model) (*DB, error) { return &DB{models: append(builtinModels(), extra...)}, nil }

// VendorName returns the vendor's name from pci.ids, or "" if unknown.
func (db *DB) VendorName(vendor PCIID) string { return "" }

// DeviceName returns the device's name from pci.ids, or "" if unknown.
func (db *DB) DeviceName(vendor, device PCIID) string { return "" }

// ModelByPF returns the model whose PF has this vendor and device ID.
func (db *DB) ModelByPF(vendor, device PCIID) (*Model, bool) {
	for i := range db.models {
		if db.models[i].Vendor == vendor && db.models[i].PFDevice == device {
			return &db.models[i], true
		}
	}
	return nil, false
}

// ModelByVF returns the model whose VF has this ID, only when exactly one
// model uses that VF ID; otherwise ok is false and n says how many share it.
func (db *DB) ModelByVF(vendor, device PCIID) (m *Model, n int) { return nil, 0 }

// ModelByName returns the model with this name (case-insensitive).
func (db *DB) ModelByName(name string) (*Model, bool) {
	for i := range db.models {
		if db.models[i].Name == name {
			return &db.models[i], true
		}
	}
	return nil, false
}

func builtinModels() []Model {
	return []Model{
		{Name: "E810-C", Family: "Intel E810", Vendor: 0x8086, PFDevice: 0x1592, VFDevice: 0x1889, PFDrivers: []string{"ice"}, VFDrivers: []string{"iavf"}, MaxVFs: 256, LinkTypes: []LinkType{Ethernet}, RDMA: true, Switchdev: true, DPDK: VFIO},
		{Name: "ConnectX-6", Family: "NVIDIA ConnectX-6", Vendor: 0x15b3, PFDevice: 0x101b, VFDevice: 0x101c, PFDrivers: []string{"mlx5_core"}, VFDrivers: []string{"mlx5_core"}, MaxVFs: 127, LinkTypes: []LinkType{InfiniBand, Ethernet}, RDMA: true, Switchdev: true, DPDK: Bifurcated},
	}
}
