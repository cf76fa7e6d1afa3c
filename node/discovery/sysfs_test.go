package discovery

import (
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/internal/dirent"
)

func TestParseNUMANode(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		wantErr string
	}{
		{"0", 0, ""},
		{"3", 3, ""},
		{"-1", -1, ""},
		{"-2", -1, "numa_node: -2 is not a NUMA node"},
		{"garbage", -1, `numa_node: "garbage" is not a decimal number`},
		{"", -1, `numa_node: "" is not a decimal number`},
	} {
		got, err := parseNUMANode(tc.in)
		if got != tc.want || errString(err) != tc.wantErr {
			t.Errorf("parseNUMANode(%q) = %d, %q; want %d, %q", tc.in, got, errString(err), tc.want, tc.wantErr)
		}
	}
}

func TestParseClass(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		ok   bool
	}{
		{"0x020000", 0x020000, true},
		{"0x020700", 0x020700, true},
		{"0x0b4000", 0x0b4000, true},
		{"020000", 0, false},
		{"0x02000", 0, false},
		{"0xzz0000", 0, false},
	} {
		got, err := parseClass(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("parseClass(%q) = %#x, %v; want %#x, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestParsePCIAddress(t *testing.T) {
	for _, tc := range []struct {
		in, want string
	}{
		{"0000:3b:02.0", "0000:3b:02.0"},
		{"0000:3B:1F.7", "0000:3b:1f.7"},
		{"ffff:ff:1f.7", "ffff:ff:1f.7"},
		{"0000:3b:20.0", ""}, // device numbers stop at 1f
		{"0000:3b:02.8", ""}, // functions stop at 7
		{"3b:02.0", ""},
		{"0000:3b:02:0", ""},
		{"0000:3g:02.0", ""},
	} {
		got, err := parsePCIAddress(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("parsePCIAddress(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestParseHardwareAddr(t *testing.T) {
	ib := "00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0a:0b:0c"
	for _, tc := range []struct {
		in      string
		want    string
		wantLen int
	}{
		{"02:AB:cd:00:00:01", "02:ab:cd:00:00:01", 6},
		{ib, ib, 20},
		{"02:ab:cd:00:00", "", 0},
		{"02:ab:cd:00:00:01:", "", 0},
		{"02-ab-cd-00-00-01", "", 0},
		{"0g:ab:cd:00:00:01", "", 0},
		{"", "", 0},
	} {
		got, n, err := parseHardwareAddr(tc.in)
		if got != tc.want || n != tc.wantLen || (err == nil) != (tc.want != "") {
			t.Errorf("parseHardwareAddr(%q) = %q, %d, %v; want %q, %d", tc.in, got, n, err, tc.want, tc.wantLen)
		}
	}
}

// GUIDs: sysfs groups them by 16 bits; ip link, CNI plugins and the NPWG
// network-status use bytes.
func TestParseGUIDs(t *testing.T) {
	if got, err := parseGUID("0002:C903:0000:1234"); err != nil || got != "00:02:c9:03:00:00:12:34" {
		t.Errorf("parseGUID = %q, %v", got, err)
	}
	if got, err := parsePortGUID("fe80:0000:0000:0000:0002:c903:000a:0b0c"); err != nil || got != "00:02:c9:03:00:0a:0b:0c" {
		t.Errorf("parsePortGUID = %q, %v", got, err)
	}
	for _, bad := range []string{"", "0002:c903:0000", "0002:c903:0000:12345", "0002-c903-0000-1234", "000g:c903:0000:1234"} {
		if _, err := parseGUID(bad); err == nil || !strings.Contains(err.Error(), "node_guid") {
			t.Errorf("parseGUID(%q) error = %v, want one naming node_guid", bad, err)
		}
	}
	if _, err := parsePortGUID("fe80:0000:0000:0000:0002:c903:000a"); err == nil {
		t.Error("parsePortGUID accepted a short GID")
	}
}

func TestParsePCIUevent(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    pciUevent
		wantErr string
	}{
		{"DRIVER=iavf\nPCI_CLASS=20000\nPCI_ID=8086:1889\nPCI_SLOT_NAME=0000:3b:01.0\n", pciUevent{0x020000, "8086", "1889"}, ""},
		{"PCI_CLASS=20700\nPCI_ID=15B3:101C", pciUevent{0x020700, "15B3", "101C"}, ""},
		{"PCI_CLASS=1000000\nPCI_ID=8086:1889", pciUevent{}, `uevent: PCI_CLASS "1000000" is not a 24-bit hex PCI class`},
		{"PCI_CLASS=20000\nPCI_ID=80861889", pciUevent{}, `uevent: PCI_ID "80861889" is not of the form vvvv:dddd`},
		{"PCI_CLASS=20000\n", pciUevent{}, "uevent: PCI_CLASS or PCI_ID missing"},
		{"", pciUevent{}, "uevent: PCI_CLASS or PCI_ID missing"},
	} {
		got, err := parsePCIUevent(tc.in)
		if errString(err) != tc.wantErr || (err == nil && got != tc.want) {
			t.Errorf("parsePCIUevent(%q) = %+v, %q; want %+v, %q", tc.in, got, errString(err), tc.want, tc.wantErr)
		}
	}
}

func TestParseVirtfn(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"virtfn0", 0, true},
		{"virtfn127", 127, true},
		{"virtfn", 0, false},
		{"virtfn01", 0, false},
		{"virtfn-1", 0, false},
		{"virtfnx", 0, false},
		{"physfn", 0, false},
	} {
		got, ok := parseVirtfn(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseVirtfn(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseVFPortName(t *testing.T) {
	for _, tc := range []struct {
		in     string
		pf, vf int
		ok     bool
	}{
		{"pf0vf3", 0, 3, true},
		{"pf1vf3", 1, 3, true},     // mlx5 dual-port: the second port's VF 3
		{"c1pf1vf12", 1, 12, true}, // BlueField host controller
		{"pf0vfr3", 0, 3, true},    // older ice kernels
		{"p0", 0, 0, false},
		{"pf0", 0, 0, false},
		{"pf0vfx", 0, 0, false},
		{"xpf0vf1", 0, 0, false},
		{"pf-1vf1", 0, 0, false},
	} {
		pf, vf, ok := parseVFPortName(tc.in)
		if pf != tc.pf || vf != tc.vf || ok != tc.ok {
			t.Errorf("parseVFPortName(%q) = %d, %d, %v; want %d, %d, %v", tc.in, pf, vf, ok, tc.pf, tc.vf, tc.ok)
		}
	}
}

// TestParseSFPortName: an SF representor's port name is pf<P>sf<sfnum>
// (the kernel's mlx5 SF example: ens2f0npf0sf88 is ens2f0's port
// "pf0sf88"), with c<C> before it for an external host's SF.
func TestParseSFPortName(t *testing.T) {
	for _, tc := range []struct {
		in     string
		pf, sf int
		ok     bool
	}{
		{"pf0sf88", 0, 88, true},
		{"pf1sf0", 1, 0, true},
		{"c1pf0sf77", 0, 77, true},
		{"pf0vf3", 0, 0, false},
		{"pf0sf", 0, 0, false},
		{"pf0sfx", 0, 0, false},
		{"p0", 0, 0, false},
	} {
		pf, sf, ok := parseSFPortName(tc.in)
		if pf != tc.pf || sf != tc.sf || ok != tc.ok {
			t.Errorf("parseSFPortName(%q) = %d, %d, %v; want %d, %d, %v", tc.in, pf, sf, ok, tc.pf, tc.sf, tc.ok)
		}
	}
}

func TestParseUplinkPortName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{{"p0", 0, true}, {"p1", 1, true}, {"pf0vf1", 0, false}, {"p", 0, false}, {"", 0, false}} {
		got, ok := parseUplinkPortName(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseUplinkPortName(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzSysfsParsers feeds every attribute parser the same bytes: none may
// panic, and what they accept must be well formed.
func FuzzSysfsParsers(f *testing.F) {
	for _, seed := range []string{"0", "-1", "0x020000", "0000:3b:02.0", "02:ab:cd:00:00:01",
		"0002:c903:0000:1234", "fe80:0000:0000:0000:0002:c903:000a:0b0c", "virtfn12", "pf0vf3", "pf1vfr2", "c1pf0vf7", "p1", "../../devices/pci0000:00/0000:00:03.0/virtio0/net/eth0", "../../devices/virtual/net/lo", "\xff\x00",
		"DRIVER=iavf\nPCI_CLASS=20000\nPCI_ID=8086:1889\n", "PCI_CLASS=fffffff\nPCI_ID=1:2"} {
		f.Add(seed)
	}
	// A getdents record whose name starts with NUL: once an empty name.
	nulName := make([]byte, 24)
	nulName[16] = 24 // d_reclen, little-endian
	f.Add(string(nulName))
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := parseNUMANode(s); err == nil && n < -1 {
			t.Errorf("parseNUMANode(%q) accepted %d", s, n)
		}
		if c, err := parseClass(s); err == nil && c > 0xffffff {
			t.Errorf("parseClass(%q) accepted %#x", s, c)
		}
		if a, err := parsePCIAddress(s); err == nil && len(a) != 12 {
			t.Errorf("parsePCIAddress(%q) accepted %q", s, a)
		}
		if a, n, err := parseHardwareAddr(s); err == nil && len(a) != 3*n-1 {
			t.Errorf("parseHardwareAddr(%q) = %q with length %d", s, a, n)
		}
		if g, err := parseGUID(s); err == nil && len(g) != 23 {
			t.Errorf("parseGUID(%q) = %q", s, g)
		}
		if g, err := parsePortGUID(s); err == nil && len(g) != 23 {
			t.Errorf("parsePortGUID(%q) = %q", s, g)
		}
		if n, ok := parseVirtfn(s); ok && n < 0 {
			t.Errorf("parseVirtfn(%q) = %d", s, n)
		}
		if u, err := parsePCIUevent(s); err == nil && u.class > 0xffffff {
			t.Errorf("parsePCIUevent(%q) accepted class %#x", s, u.class)
		}
		dirent.Walk([]byte(s), func(name []byte) {
			if len(name) == 0 || len(name) > len(s) {
				t.Errorf("dirent.Walk(%q) gave name %q", s, name)
			}
		})
		if pf, vf, ok := parseVFPortName(s); ok && (pf < 0 || vf < 0) {
			t.Errorf("parseVFPortName(%q) = %d, %d", s, pf, vf)
		}
		if p, ok := parseUplinkPortName(s); ok && p < 0 {
			t.Errorf("parseUplinkPortName(%q) = %d", s, p)
		}
		if addr, rel, ok := splitAtFunction(s); ok && (len(addr) != 12 || rel == "" || rel == ".") {
			t.Errorf("splitAtFunction(%q) = %q, %q", s, addr, rel)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
