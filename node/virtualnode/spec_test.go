package virtualnode_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/hwdb"
)

func TestDefaultSpec(t *testing.T) {
	want := &virtualnode.Spec{
		Name: "default",
		PFs: []virtualnode.PFSpec{
			{Model: "E810-C", Count: 2, VFs: 8, VFIO: "6-7", NUMA: []int{0, 1}},
			{Model: "ConnectX-6", VFs: 4, LinkType: hwdb.InfiniBand, NUMA: []int{0}},
		},
		NICs: []virtualnode.NICSpec{{Name: "mgmt", Vendor: "8086", Device: "1521", Driver: "igb", DefaultRoute: true}},
	}
	if got := virtualnode.DefaultSpec(); !reflect.DeepEqual(got, want) {
		t.Errorf("DefaultSpec() =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseSpecValid(t *testing.T) {
	tests := []struct {
		name, in string
		want     *virtualnode.Spec
	}{
		{
			name: "JSON",
			in:   `{"name": "j", "pfs": [{"model": "E810-C", "vfs": 2, "vfio": "0,1"}]}`,
			want: &virtualnode.Spec{Name: "j", PFs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 2, VFIO: "0,1"}}},
		},
		{
			name: "vfio as a YAML number",
			in:   "name: yy\npfs:\n- {model: E810-C, vfs: 8, vfio: 7}",
			want: &virtualnode.Spec{Name: "yy", PFs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 8, VFIO: "7"}}},
		},
		{
			name: "every field",
			in: `name: full-1
pfs:
- {model: ConnectX-6, count: 3, totalVFs: 16, vfs: 4, vfio: " 0 , 2-3", numa: [1, 0], linkType: ethernet, vfOffset: 2, vfStride: 2, speed: 25000, sfs: 2}
nics:
- {name: eth9, vendor: "0x14e4", device: 165f, driver: tg3, numa: 1, defaultRoute: true, speed: 100}`,
			want: &virtualnode.Spec{
				Name: "full-1",
				PFs: []virtualnode.PFSpec{{Model: "ConnectX-6", Count: 3, TotalVFs: 16, VFs: 4, VFIO: " 0 , 2-3", NUMA: []int{1, 0},
					LinkType: hwdb.Ethernet, VFOffset: 2, VFStride: 2, Speed: 25000, SFs: 2}},
				NICs: []virtualnode.NICSpec{{Name: "eth9", Vendor: "0x14e4", Device: "165f", Driver: "tg3", NUMA: 1, DefaultRoute: true, Speed: 100}},
			},
		},
		{
			name: "unquoted IDs that read as numbers",
			in:   "name: u\nnics: [{vendor: 8086, device: 1521, driver: igb}]",
			want: &virtualnode.Spec{Name: "u", NICs: []virtualnode.NICSpec{{Vendor: "8086", Device: "1521", Driver: "igb"}}},
		},
		{name: "no NICs at all", in: "name: empty", want: &virtualnode.Spec{Name: "empty"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := virtualnode.ParseSpec([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestParseSpecInvalid(t *testing.T) {
	const pf = "name: n\npfs:\n- model: E810-C\n  vfs: 8\n  "
	const nic = "name: n\nnics:\n- {name: mgmt, vendor: \"8086\", device: \"1521\", driver: igb, "
	tests := []struct {
		name, in, want string
	}{
		{"no name", "pfs: []", `field name: missing`},
		{"bad name", "name: Foo", `field name: "Foo" is not 1-32 lower-case letters, digits or '-'`},
		{"unknown field", pf + "colour: red", `parse spec: error unmarshaling JSON: while decoding JSON: json: unknown field "colour"`},
		{"duplicate key", "name: a\nname: b", "parse spec: error converting YAML to JSON: yaml: unmarshal errors:\n  line 2: key \"name\" already set in map"},
		{"vfio list", pf + "vfio: [1, 2]", `parse spec: error unmarshaling JSON: while decoding JSON: [1,2] is not a list of VF indices such as "0,2-3"`},
		{"reversed range", "name: n\npfs:\n- {model: E810-C}\n- {model: ConnectX-6, vfs: 10, vfio: \"0,9-3\"}",
			`pfs[1] "ConnectX-6": field vfio: range "9-3" is reversed`},
		{"index past vfs", pf + "vfio: 6-8", `pfs[0] "E810-C": field vfio: index 8 is out of range: vfs is 8`},
		{"vfio without VFs", "name: n\npfs: [{model: E810-C, vfio: \"0\"}]", `pfs[0] "E810-C": field vfio: index 0 is out of range: vfs is 0`},
		{"not an index", pf + "vfio: 1-x", `pfs[0] "E810-C": field vfio: "x" is not an index`},
		{"empty element", pf + "vfio: 1,,2", `pfs[0] "E810-C": field vfio: empty element in "1,,2"`},
		{"no model", "name: n\npfs: [{vfs: 2}]", `pfs[0]: field model: missing`},
		{"totalVFs below vfs", pf + "totalVFs: 4", `pfs[0] "E810-C": field totalVFs: 4 is less than vfs (8)`},
		{"VFs with SR-IOV off", pf + "sriovOff: true", `pfs[0] "E810-C": field sriovOff: a PF with SR-IOV off has no VFs: drop vfs and totalVFs`},
		{"partition key", pf + "vfPKey: \"0x18001\"", `pfs[0] "E810-C": field vfPKey: "0x18001" is not a 16-bit hex partition key such as 0x7fff`},
		{"negative count", pf + "count: -1", `pfs[0] "E810-C": field count: -1 is out of range 0-99`},
		{"too many VFs", "name: n\npfs: [{model: E810-C, vfs: 70000}]", `pfs[0] "E810-C": field vfs: 70000 is out of range 0-65535`},
		{"negative SFs", pf + "sfs: -1", `pfs[0] "E810-C": field sfs: -1 is out of range 0-2048`},
		{"too many SFs", pf + "sfs: 2049", `pfs[0] "E810-C": field sfs: 2049 is out of range 0-2048`},
		{"NUMA node", pf + "numa: [0, 64]", `pfs[0] "E810-C": field numa: node 64 is out of range 0-63`},
		{"link type", pf + "linkType: fddi", `pfs[0] "E810-C": field linkType: "fddi" is neither "ethernet" nor "infiniband"`},
		{"bad vendor", "name: n\nnics:\n- {name: mgmt, vendor: \"80866\", device: \"1521\", driver: igb}",
			`nics[0] "mgmt": field vendor: "80866" is not a 4-digit hex PCI ID`},
		{"hex number as vendor", "name: n\nnics:\n- {vendor: 0x8086, device: \"1521\", driver: igb}",
			`nics[0] "32902:1521": field vendor: "32902" is not a 4-digit hex PCI ID`},
		{"no device", "name: n\nnics:\n- {vendor: \"8086\", driver: igb}", `nics[0] "8086:": field device: missing`},
		{"missing driver", "name: n\nnics:\n- {name: mgmt, vendor: \"8086\", device: \"1521\"}", `nics[0] "mgmt": field driver: missing`},
		{"driver path", "name: n\nnics:\n- {name: mgmt, vendor: \"8086\", device: \"1521\", driver: ../igb}", `nics[0] "mgmt": field driver: "../igb" is not a driver name`},
		{"long ifname", "name: n\nnics:\n- {name: averyveryverylongname, vendor: \"8086\", device: \"1521\", driver: igb}",
			`nics[0] "averyveryverylongname": field name: "averyveryverylongname" is not a valid interface name (1-15 characters, no '/', ':' or space)`},
		{"two default routes", nic + "defaultRoute: true}\n- {name: b, vendor: \"8086\", device: \"1521\", driver: igb, defaultRoute: true}",
			`nics[1] "b": field defaultRoute: only one NIC may hold the default route, and nics[0] does`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := virtualnode.ParseSpec([]byte(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseSpec error\n got %q\nwant %q", err, tt.want)
			}
		})
	}
}

func TestSpecErrorIsTyped(t *testing.T) {
	_, err := virtualnode.ParseSpec([]byte("name: n\npfs:\n- {model: E810-C, vfs: 4, vfio: 9-3}"))
	se, ok := errors.AsType[*virtualnode.SpecError](err)
	if !ok {
		t.Fatalf("error %v is not a *SpecError", err)
	}
	if se.Entry != `pfs[0] "E810-C"` || se.Field != "vfio" {
		t.Errorf("SpecError{Entry: %q, Field: %q}, want pfs[0] \"E810-C\" and vfio", se.Entry, se.Field)
	}
}

// TestBuildSpecErrors covers what only the hardware database or the PCI
// layout can reject; Build must leave no directory behind.
func TestBuildSpecErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"unknown model", "name: n\npfs: [{model: E810-X}]", `pfs[0] "E810-X": field model: unknown model "E810-X"`},
		{"unsupported link type", "name: n\npfs: [{model: E810-C, linkType: infiniband}]",
			`pfs[0] "E810-C": field linkType: model E810-C does not support "infiniband" (supports [ethernet])`},
		{"VFs beyond the last bus", "name: n\npfs: [{model: E810-C, totalVFs: 60000}]",
			`pfs[0] "E810-C": PCI bus numbers run out: this NIC needs buses 0x3a to 0x125`},
		{"NICs beyond the last bus", "name: n\npfs: [{model: ConnectX-6, count: 99}]\nnics: [{vendor: \"8086\", device: \"1521\", driver: igb}]",
			`nics[0] "8086:1521": PCI bus numbers run out: this NIC needs buses 0x100 to 0x101`},
		{"SFs on a model without", "name: n\npfs: [{model: ConnectX-6, sfs: 2}]",
			`pfs[0] "ConnectX-6": field sfs: 2 scalable functions, but model ConnectX-6 has none (maxSFs 0)`},
		{"more SFs than the model carries", "name: n\npfs: [{model: ConnectX-6 Dx, sfs: 253}]",
			`pfs[0] "ConnectX-6 Dx": field sfs: 253 is more than model ConnectX-6 Dx carries (maxSFs 252)`},
		{"SFs on InfiniBand", "name: n\npfs: [{model: ConnectX-7, linkType: infiniband, sfs: 1}]",
			`pfs[0] "ConnectX-7": field sfs: scalable functions are ports of the switchdev eswitch, which an InfiniBand port has none of`},
		{"SF netdev name taken", "name: n\npfs: [{model: ConnectX-6 Dx, sfs: 1}]\nnics: [{name: enp59s0f0s88, vendor: \"8086\", device: \"1521\", driver: igb}]",
			`nics[0] "enp59s0f0s88": field name: "enp59s0f0s88" is already the netdev name of mlx5_core.sf.0`},
		{"netdev name taken", "name: n\npfs: [{model: E810-C, vfs: 2}]\nnics: [{name: enp59s0f0v1, vendor: \"8086\", device: \"1521\", driver: igb}]",
			`nics[0] "enp59s0f0v1": field name: "enp59s0f0v1" is already the netdev name of 0000:3b:01.1`},
	}
	db := vnodetest.OpenDB(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := vnodetest.Dir(t)
			_, err := virtualnode.Build(context.Background(), mustParse(t, tt.in), db, virtualnode.Options{Dir: dir})
			if err == nil || err.Error() != tt.want {
				t.Errorf("Build error\n got %q\nwant %q", err, tt.want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Build left %s behind (stat: %v)", dir, err)
			}
		})
	}
}

func FuzzParseSpec(f *testing.F) {
	compact, err := yaml.Marshal(virtualnode.DefaultSpec()) // default.yaml less its comments, which slow minimizing
	if err != nil {
		f.Fatal(err)
	}
	f.Add(compact)
	f.Add([]byte(`{"name":"j","pfs":[{"model":"ConnectX-6","count":2,"vfs":3,"vfio":"0,2","linkType":"infiniband"}]}`))
	f.Add([]byte("name: n\npfs: [{model: E810-C, vfs: 300, totalVFs: 512, vfOffset: 3, vfStride: 5, vfio: 7-299}]"))
	f.Add([]byte("name: n\nnics: [{name: x, vendor: \"8086\", device: \"1521\", driver: igb, defaultRoute: true}]"))
	db := vnodetest.OpenDB(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := virtualnode.ParseSpec(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		// A valid spec survives a round trip through YAML unchanged.
		out, err := yaml.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := virtualnode.ParseSpec(out)
		if err != nil {
			t.Fatalf("re-parsing %q: %v", out, err)
		}
		if out2, _ := yaml.Marshal(again); !bytes.Equal(out, out2) {
			t.Fatalf("round trip changed the spec:\n%s\n%s", out, out2)
		}
		if totalVFs(spec) <= 256 {
			checkPlan(t, spec, db)
		}
	})
}

// totalVFs bounds the VFs a spec enables, so that the fuzzer lays out only
// small nodes.
func totalVFs(s *virtualnode.Spec) int {
	n := 0
	for _, p := range s.PFs {
		n += max(p.Count, 1) * (p.VFs + p.SFs)
	}
	return n
}

// checkPlan lays a valid spec out and checks that addresses and netdev
// names are unique and every VF sits where offset and stride put it.
func checkPlan(t *testing.T, spec *virtualnode.Spec, db *hwdb.DB) {
	st, err := virtualnode.Plan(spec, db)
	if err != nil {
		if _, ok := errors.AsType[*virtualnode.SpecError](err); !ok {
			t.Fatalf("plan error %v is not a *SpecError", err)
		}
		return
	}
	byAddr, names := map[string]*virtualnode.Function{}, map[string]bool{}
	for _, f := range st.Functions {
		if byAddr[f.Addr] != nil {
			t.Fatalf("address %s given twice", f.Addr)
		}
		byAddr[f.Addr] = f
		if f.Netdev != nil && names[f.Netdev.Name] {
			t.Fatalf("netdev name %s given twice", f.Netdev.Name)
		}
		if f.Netdev != nil {
			names[f.Netdev.Name] = true
		}
		for _, sf := range f.SFs {
			if names[sf.Netdev.Name] {
				t.Fatalf("netdev name %s given twice", sf.Netdev.Name)
			}
			names[sf.Netdev.Name] = true
		}
	}
	for _, vf := range st.Functions {
		if !vf.IsVF() {
			continue
		}
		pf := byAddr[vf.PF]
		pfRID, _ := virtualnode.ParseRoutingID(pf.Addr)
		want := pfRID + virtualnode.RoutingID(pf.SRIOV.Offset+pf.SRIOV.Stride*vf.VFIndex)
		if vf.Addr != want.Addr() {
			t.Fatalf("VF %d of %s at %s, want %s", vf.VFIndex, pf.Addr, vf.Addr, want.Addr())
		}
	}
}

func TestSpecPFNames(t *testing.T) {
	db := vnodetest.OpenDB(t)
	spec := &virtualnode.Spec{Name: "names", PFs: []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 2, Names: []string{"ens785f0"}}}}
	st, err := virtualnode.Plan(spec, db)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range st.Functions {
		if f.Ifname != "" {
			got = append(got, f.Ifname)
		}
	}
	want := []string{"ens785f0", "ens785f0v0", "ens785f0v1", "enp62s0f0", "enp62s0f0v0", "enp62s0f0v1"}
	if !slices.Equal(got, want) {
		t.Errorf("netdev names %v, want %v", got, want)
	}
	spec.PFs[0].Names = []string{"a", "b", "c"}
	if err := spec.Validate(); err == nil || !strings.Contains(err.Error(), "names") {
		t.Errorf("three names for two PFs: error %v, want one naming the names field", err)
	}
}
