package hwdb

import (
	"cmp"
	"slices"
	"strings"
	"testing"
)

func TestModelByPF(t *testing.T) {
	db := openDB(t)
	tests := []struct {
		vendor, pf PCIID
		want       string
	}{
		{0x8086, 0x1592, "E810-C"},
		{0x8086, 0x10fb, "82599 SFP+"},
		{0x15b3, 0x101d, "ConnectX-6 Dx"},
		{0x15b3, 0xa2dc, "BlueField-3"},
		{0x14e4, 0x1750, "BCM57508"},
		{0x1077, 0x8070, "QL41000"},
	}
	for _, tt := range tests {
		m, ok := db.ModelByPF(tt.vendor, tt.pf)
		if !ok || m.Name != tt.want {
			t.Errorf("ModelByPF(%v, %v) = %v, %v; want %q", tt.vendor, tt.pf, m, ok, tt.want)
		}
	}
	for _, id := range [][2]PCIID{{0x8086, 0x1889}, {0x15b3, 0x101e}, {0x1234, 0x1592}, {0, 0}} {
		if m, ok := db.ModelByPF(id[0], id[1]); ok {
			t.Errorf("ModelByPF(%v, %v) = %q; want none: not a PF of a model", id[0], id[1], m.Name)
		}
	}
}

func TestModelByVF(t *testing.T) {
	db := openDB(t)
	tests := []struct {
		vendor, vf PCIID
		wantName   string
		wantN      int
	}{
		{0x15b3, 0x1016, "ConnectX-4 Lx", 1},
		{0x15b3, 0x101c, "ConnectX-6", 1},
		{0x1077, 0x8090, "QL41000", 1},
		// Shared VF IDs: the model must come from the PF.
		{0x15b3, 0x101e, "", 7}, // CX-6 Dx, CX-6 Lx, CX-7, CX-8, CX-9, BF-2, BF-3
		{0x8086, 0x1889, "", 25},
		{0x8086, 0x10ed, "", 4},
		{0x1077, 0x1664, "", 4},
		{0x8086, 0x1592, "", 0}, // a PF, not a VF
	}
	for _, tt := range tests {
		m, n := db.ModelByVF(tt.vendor, tt.vf)
		if n != tt.wantN || (tt.wantName == "") != (m == nil) || m != nil && m.Name != tt.wantName {
			t.Errorf("ModelByVF(%v, %v) = %v, %d; want %q, %d", tt.vendor, tt.vf, m, n, tt.wantName, tt.wantN)
		}
	}
}

func TestModelByName(t *testing.T) {
	db := openDB(t)
	for _, name := range []string{"ConnectX-6", "connectx-6", "CONNECTX-6"} {
		m, ok := db.ModelByName(name)
		if !ok || m.PFDevice != 0x101b {
			t.Errorf("ModelByName(%q) = %v, %v; want ConnectX-6 (101b)", name, m, ok)
		}
	}
	for _, name := range []string{"", "ConnectX", "ConnectX-6 ", strings.Repeat("x", 100)} {
		if m, ok := db.ModelByName(name); ok {
			t.Errorf("ModelByName(%q) = %q; want none", name, m.Name)
		}
	}
}

func TestModelsAreSortedCopies(t *testing.T) {
	db := openDB(t)
	models := db.Models()
	sorted := slices.IsSortedFunc(models, func(a, b Model) int {
		return cmp.Or(cmp.Compare(a.Vendor, b.Vendor), strings.Compare(a.Name, b.Name))
	})
	if !sorted {
		t.Error("Models() is not sorted by vendor, then name")
	}
	models[0].Name = "changed"
	models[0].PFDrivers[0] = "changed"
	again := db.Models()
	if again[0].Name == "changed" || again[0].PFDrivers[0] == "changed" {
		t.Error("changing the result of Models() changed the DB")
	}
}

func TestOpenExtraOverridesBuiltin(t *testing.T) {
	mine := Model{
		Name: "My E810", Vendor: 0x8086, PFDevice: 0x1592, VFDevice: 0x1889,
		PFDrivers: []string{"ice"}, VFDrivers: []string{"vfio-pci"}, MaxVFs: 8,
	}
	db, err := Open(mine)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := db.ModelByPF(0x8086, 0x1592)
	if !ok || m.Name != "My E810" || m.MaxVFs != 8 {
		t.Errorf("ModelByPF(8086, 1592) = %v, %v; want the admin's model", m, ok)
	}
	if _, ok := db.ModelByName("E810-C"); ok {
		t.Error(`ModelByName("E810-C") found the replaced built-in model`)
	}
	if got, want := len(db.Models()), len(builtinModels()); got != want {
		t.Errorf("len(Models()) = %d; want %d: an override must not add a model", got, want)
	}
}

func TestOpenExtraAddsModel(t *testing.T) {
	drivers := []string{"mydrv"}
	db, err := Open(Model{Name: "Acme 1", Vendor: 0x1234, PFDevice: 0x0001, VFDevice: 0x0002, PFDrivers: drivers})
	if err != nil {
		t.Fatal(err)
	}
	drivers[0] = "changed" // Open must have copied the model
	m, n := db.ModelByVF(0x1234, 0x0002)
	if n != 1 || m.Name != "Acme 1" || m.PFDrivers[0] != "mydrv" {
		t.Errorf("ModelByVF(1234, 0002) = %v, %d; want Acme 1 with driver mydrv", m, n)
	}
	if got, want := len(db.Models()), len(builtinModels())+1; got != want {
		t.Errorf("len(Models()) = %d; want %d", got, want)
	}
}

func TestOpenRejectsBadExtra(t *testing.T) {
	tests := []struct {
		name    string
		extra   []Model
		wantErr string
	}{
		{"invalid", []Model{{Name: "X", Vendor: 0x1234}},
			`hwdb: extra[0] "X": field pfDevice: missing or "0000"`},
		{"same PF twice", []Model{
			{Name: "A", Vendor: 0x1234, PFDevice: 1},
			{Name: "B", Vendor: 0x1234, PFDevice: 1},
		}, `hwdb: extra[1] "B": field pfDevice: "0001" is also the PF of extra[0] "A"`},
		{"name of a built-in model", []Model{{Name: "connectx-6", Vendor: 0x1234, PFDevice: 1}},
			`are both named`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Open(tt.extra...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Open() error = %v; want one containing %q", err, tt.wantErr)
			}
		})
	}
}
