package hwdb

import (
	"runtime"
	"strings"
	"testing"
)

func openDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestVendorName(t *testing.T) {
	db := openDB(t)
	tests := map[PCIID]string{
		0x8086: "Intel Corporation",
		0x15b3: "Mellanox Technologies",
		0x14e4: "Broadcom Inc. and subsidiaries",
		0x1077: "QLogic Corp.",
		0x15cf: "Hilscher Gesellschaft für Systemautomation mbH", // UTF-8 survives
		0xffff: "Illegal Vendor ID",
		0x0000: "",
		0x0002: "",
	}
	for vendor, want := range tests {
		if got := db.VendorName(vendor); got != want {
			t.Errorf("VendorName(%v) = %q; want %q", vendor, got, want)
		}
	}
}

func TestDeviceName(t *testing.T) {
	db := openDB(t)
	tests := []struct {
		vendor, device PCIID
		want           string
	}{
		{0x8086, 0x1592, "Ethernet Controller E810-C for QSFP"},
		{0x8086, 0x1889, "Ethernet Adaptive Virtual Function"},
		{0x15b3, 0x101e, "ConnectX Family mlx5Gen Virtual Function"},
		{0x0010, 0x8139, "AT-2500TX V3 Ethernet"}, // first device of the file
		{0x8086, 0xfffe, ""},
		{0x1592, 0x8086, ""}, // vendor and device swapped
		{0x0002, 0x0001, ""},
	}
	for _, tt := range tests {
		if got := db.DeviceName(tt.vendor, tt.device); got != tt.want {
			t.Errorf("DeviceName(%v, %v) = %q; want %q", tt.vendor, tt.device, got, tt.want)
		}
	}
}

// TestEmbeddedNamesAreComplete guards against a generator that drops too
// much: the 2023.04.10 pci.ids has 2325 vendors and 17616 devices.
func TestEmbeddedNamesAreComplete(t *testing.T) {
	db := openDB(t)
	if got := len(db.names.vendors); got < 2325 {
		t.Errorf("embedded pci.ids has %d vendors; want at least 2325", got)
	}
	if got := len(db.names.devices); got < 17616 {
		t.Errorf("embedded pci.ids has %d devices; want at least 17616", got)
	}
}

func TestWritePCIIDs(t *testing.T) {
	db := openDB(t)
	var buf strings.Builder
	if err := db.WritePCIIDs(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"#\tVersion: 2023.04.10\n",
		"(version 2 or higher) or the 3-clause BSD License.",
		"\n8086  Intel Corporation\n",
		"\n\t1592  Ethernet Controller E810-C for QSFP\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("WritePCIIDs output lacks %q", want)
		}
	}
	for _, unwanted := range []string{"\n\t\t", "\nC "} {
		if strings.Contains(out, unwanted) {
			t.Errorf("WritePCIIDs output has %q: subsystem or class lines were kept", unwanted)
		}
	}
	back, err := parseNames(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.vendors) != len(db.names.vendors) || len(back.devices) != len(db.names.devices) {
		t.Errorf("WritePCIIDs output has %d vendors and %d devices; want %d and %d",
			len(back.vendors), len(back.devices), len(db.names.vendors), len(db.names.devices))
	}
}

func TestParseNames(t *testing.T) {
	// Out of order, and 15b3 named twice: the later line wins.
	n, err := parseNames("# comment\n\n8086  Intel\n\t1592  E810-C QSFP\n15b3  Mellanox\n\t101e  mlx5 VF\n10de  NVIDIA\n15b3  Mellanox Technologies\n\t1021  CX-7")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		table []nameAt
		key   uint32
		want  string
	}{
		{n.vendors, 0x8086, "Intel"},
		{n.vendors, 0x15b3, "Mellanox Technologies"},
		{n.vendors, 0x10de, "NVIDIA"},
		{n.vendors, 0x1234, ""},
		{n.devices, deviceKey(0x8086, 0x1592), "E810-C QSFP"},
		{n.devices, deviceKey(0x15b3, 0x101e), "mlx5 VF"},
		{n.devices, deviceKey(0x15b3, 0x1021), "CX-7"},
		{n.devices, deviceKey(0x8086, 0x101e), ""},
	}
	for _, tc := range tests {
		if got := n.lookup(tc.table, tc.key); got != tc.want {
			t.Errorf("lookup(%#x) = %q, want %q", tc.key, got, tc.want)
		}
	}
}

func TestParseNamesRejects(t *testing.T) {
	tests := []struct{ text, wantErr string }{
		{"\t1592  device before any vendor\n", `line 1: "\t1592  device before any vendor"`},
		{"8086  Intel\n\t\t8086 0001  subsystem\n", "line 2:"},
		{"8086 Intel\n", "line 1:"},
		{"8086  \n", "line 1:"},
		{"80g6  Bad\n", "line 1:"},
		{"C 02  Network controller\n", "line 1:"},
		{"8086  Intel\n 1592  leading space\n", "line 2:"},
	}
	for _, tt := range tests {
		_, err := parseNames(tt.text)
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("parseNames(%q) error = %v; want one containing %q", tt.text, err, tt.wantErr)
		}
	}
}

// TestNamesHeap bounds what the names keep on the heap, which the agent
// carries for its whole life: 8 bytes a name, the text staying in the
// binary's read-only data.
func TestNamesHeap(t *testing.T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	n, err := parseNames(pciIDs)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	kept := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	limit := 8*int64(len(n.vendors)+len(n.devices)) + 64<<10
	runtime.KeepAlive(n)
	if kept > limit {
		t.Errorf("the names keep %d KiB on the heap; want at most %d KiB (8 bytes a name)", kept>>10, limit>>10)
	}
}

func TestLookupsDoNotAllocate(t *testing.T) {
	db := openDB(t)
	lookups := map[string]func(){
		"VendorName":  func() { _ = db.VendorName(0x8086) },
		"DeviceName":  func() { _ = db.DeviceName(0x15b3, 0x101e) },
		"ModelByPF":   func() { _, _ = db.ModelByPF(0x8086, 0x1592) },
		"ModelByVF":   func() { _, _ = db.ModelByVF(0x15b3, 0x101e) },
		"ModelByName": func() { _, _ = db.ModelByName("connectx-6 DX") },
	}
	for name, lookup := range lookups {
		if allocs := testing.AllocsPerRun(1000, lookup); allocs != 0 {
			t.Errorf("%s allocates %v times per call; want 0", name, allocs)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Open(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	db := openDB(b)
	b.Run("VendorName", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = db.VendorName(0x8086)
		}
	})
	b.Run("DeviceName", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = db.DeviceName(0x8086, 0x1592)
		}
	})
	b.Run("ModelByPF", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = db.ModelByPF(0x15b3, 0x101d)
		}
	})
	b.Run("ParsePCIID", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = ParsePCIID("0x8086\n")
		}
	})
}

func FuzzParseNames(f *testing.F) {
	f.Add("# c\n8086  Intel\n\t1592  E810-C\n")
	f.Add("15b3  Mellanox\n\t101e  VF\n\t\t15b3 0001  sub\n")
	f.Add("\t1592  orphan\n")
	f.Add("C 02  Network controller\n\t00  Ethernet\n")
	f.Fuzz(func(t *testing.T, text string) {
		n, err := parseNames(text)
		if err != nil {
			return
		}
		for _, d := range n.devices {
			if n.lookup(n.vendors, d.key>>16) == "" {
				t.Fatalf("device %08x %q has no vendor", d.key, n.lookup(n.devices, d.key))
			}
		}
		for _, v := range n.vendors {
			if name := n.lookup(n.vendors, v.key); !strings.Contains(text, "  "+name) {
				t.Fatalf("vendor name %q is not in the text", name)
			}
		}
	})
}
