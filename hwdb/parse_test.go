package hwdb

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseModels(t *testing.T) {
	want := []Model{{
		Name: "Acme 100G", Family: "Acme", Vendor: 0x1234, PFDevice: 0xabcd, VFDevice: 0xabce,
		PFDrivers: []string{"acme"}, VFDrivers: []string{"acmevf"}, MaxVFs: 64, MaxSFs: 16,
		LinkTypes: []LinkType{Ethernet}, RDMA: true, DPDK: VFIO,
	}}
	inputs := map[string]string{
		"JSON list": `[{"name": "Acme 100G", "family": "Acme", "vendor": "1234", "pfDevice": "0xABCD",
			"vfDevice": "abce", "pfDrivers": ["acme"], "vfDrivers": ["acmevf"], "maxVFs": 64, "maxSFs": 16,
			"linkTypes": ["ethernet"], "rdma": true, "dpdk": "vfio-pci"}]`,
		"YAML object": `
models:
- name: Acme 100G
  family: Acme
  vendor: "1234"
  pfDevice: "0xabcd"
  vfDevice: 'ABCE'
  pfDrivers: [acme]
  vfDrivers: [acmevf]
  maxVFs: 64
  maxSFs: 16
  linkTypes: [ethernet]
  rdma: true
  switchdev: false
  dpdk: vfio-pci
`,
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			got, err := ParseModels([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ParseModels() = %+v; want %+v", got, want)
			}
		})
	}
}

func TestParseModelsEmpty(t *testing.T) {
	for _, in := range []string{"", "\n", "[]", "models: []", "{}", "null"} {
		got, err := ParseModels([]byte(in))
		if err != nil || len(got) != 0 {
			t.Errorf("ParseModels(%q) = %v, %v; want no models, nil", in, got, err)
		}
	}
}

func TestParseModelsErrors(t *testing.T) {
	// ok is a valid entry that the cases vary, as YAML flow mappings.
	const ok = `name: X9, vendor: "1234", pfDevice: "0001", vfDevice: "0002"`
	tests := []struct{ in, wantErr string }{
		{`[{` + ok + `}, {` + ok + `}, {name: X9b, vendor: "1234", pfDevice: "0003", vfDevice: "zz12"}]`,
			`hwdb: models[2] "X9b": field vfDevice: "zz12" is not a 4-digit hex PCI ID`},
		{`[{name: X9, vendor: 8086, pfDevice: "0001"}]`,
			`models[0] "X9": field vendor: 8086 is not a 4-digit hex PCI ID in quotes`},
		{`[{name: X9, vendor: 0x8086, pfDevice: "0001"}]`,
			`models[0] "X9": field vendor: 32902 is not a 4-digit hex PCI ID in quotes`},
		{`[{` + ok + `, color: red}]`, `models[0] "X9": unknown field "color"`},
		{`[{` + ok + `, maxVFs: many}]`, `models[0] "X9": field maxVFs: "many" is not a whole number`},
		{`[{` + ok + `, maxVFs: -1}]`, `models[0] "X9": field maxVFs: -1 is negative`},
		{`[{` + ok + `, maxSFs: -1}]`, `models[0] "X9": field maxSFs: -1 is out of range 0-65535`},
		{`[{` + ok + `, maxSFs: 65536}]`, `models[0] "X9": field maxSFs: 65536 is out of range 0-65535`},
		{`[{` + ok + `, maxSFs: some}]`, `models[0] "X9": field maxSFs: "some" is not a whole number`},
		{`[{` + ok + `, rdma: "yes"}]`, `models[0] "X9": field rdma: "yes" is not true or false`},
		{`[{` + ok + `, pfDrivers: ice}]`, `models[0] "X9": field pfDrivers: "ice" is not a list of strings`},
		{`[{` + ok + `, pfDrivers: [ice, ""]}]`, `models[0] "X9": field pfDrivers[1]: "" is empty`},
		{`[{` + ok + `, vfDrivers: [" "]}]`, `models[0] "X9": field vfDrivers[0]: " " is empty`},
		{`[{` + ok + `, linkTypes: [ethernet, ethernt]}]`, `models[0] "X9": field linkTypes[1]: "ethernt" is not a link type`},
		{`[{` + ok + `, dpdk: uio}]`, `models[0] "X9": field dpdk: "uio" is not a DPDK binding`},
		{`[{vendor: "1234", pfDevice: "0001"}]`, `models[0] "": field name: "" is empty`},
		{`[{name: X9, pfDevice: "0001"}]`, `models[0] "X9": field vendor: missing or "0000"`},
		{`[{name: X9, vendor: "1234"}]`, `models[0] "X9": field pfDevice: missing or "0000"`},
		{`[{name: 42, vendor: "1234", pfDevice: "0001"}]`, `models[0] "": field name: 42 is not a string`},
		{`[{` + ok + `}, {name: x9, vendor: "1234", pfDevice: "0005"}]`,
			`models[1] "x9": field name: "x9" is also the name of models[0]`},
		{`[{` + ok + `}, {name: Z9, vendor: "1234", pfDevice: "0001"}]`,
			`models[1] "Z9": field pfDevice: "0001" is also the PF of models[0] "X9"`},
		{`[{name: y, vendor: "1234", pfDevice: "0001"}]`, `models[0] "": field name: true is not a string (quote it in YAML)`},
		{`[{` + ok + `}, 42]`, `models[1] "": 42 is not a model object`},
		{`{modles: []}`, `unknown field "modles"`},
		{`42`, `42 is neither a list of models nor {"models": [...]}`},
		{`[{` + ok + `, name: X10}]`, `models: `}, // duplicate key
		{`[{`, `models: `}, // YAML syntax
	}
	for _, tt := range tests {
		_, err := ParseModels([]byte(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("ParseModels(%s)\nerror = %v\nwant one containing %q", tt.in, err, tt.wantErr)
		}
	}
}

// TestParseModelsReadsModels checks that what Model marshals to,
// ParseModels reads back: the built-in table survives the round trip.
func TestParseModelsReadsModels(t *testing.T) {
	want := openDB(t).Models()
	js, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseModels(js)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseModels(json.Marshal(Models())) differs from Models()")
	}
}

// TestJSONFieldsMatchModel keeps jsonFields in step with Model's tags.
func TestJSONFieldsMatchModel(t *testing.T) {
	var m Model
	fields := m.jsonFields()
	typ := reflect.TypeFor[Model]()
	if len(fields) != typ.NumField() {
		t.Errorf("jsonFields has %d fields; Model has %d", len(fields), typ.NumField())
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		target, ok := fields[tag]
		if !ok {
			t.Errorf("jsonFields lacks %q (Model.%s)", tag, f.Name)
			continue
		}
		if reflect.ValueOf(target).Pointer() != reflect.ValueOf(&m).Elem().Field(i).Addr().Pointer() {
			t.Errorf("jsonFields[%q] does not point at Model.%s", tag, f.Name)
		}
	}
}

func FuzzParseModels(f *testing.F) {
	f.Add(`[{"name": "A", "vendor": "1234", "pfDevice": "0001", "vfDevice": "0002", "linkTypes": ["ethernet"]}]`)
	f.Add("models:\n- name: B\n  vendor: '8086'\n  pfDevice: '0x1592'\n  dpdk: vfio-pci\n  maxVFs: 4\n")
	f.Add(`[{"name": "X9", "vendor": "1234", "pfDevice": "0001", "vfDevice": "zz12"}]`)
	f.Add(`{"models": [{"name": "C", "vendor": 8086}]}`)
	f.Add(`[{name: D, vendor: "1", pfDevice: "2"}, 42, null]`)
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		models, err := ParseModels([]byte(in))
		if err != nil {
			return
		}
		if err := validateModels("models", models); err != nil {
			t.Fatalf("ParseModels accepted invalid models: %v", err)
		}
		js, err := json.Marshal(models)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseModels(js)
		if err != nil {
			t.Fatalf("ParseModels rejects its own output %s: %v", js, err)
		}
		if len(again) != len(models) {
			t.Fatalf("round trip gave %d models; want %d", len(again), len(models))
		}
		if _, err := Open(models...); err != nil && !strings.Contains(err.Error(), "are both named") {
			t.Fatalf("Open rejects parsed models: %v", err)
		}
	})
}

// TestOpenFile: the admin's file adds its models; a missing or bad file is
// an error naming it.
func TestOpenFile(t *testing.T) {
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	model := `{name: X9, vendor: "1234", pfDevice: "0001", vfDevice: "0002", pfDrivers: [x9], vfDrivers: [x9vf], linkTypes: [ethernet]}`
	if err := os.WriteFile(good, []byte("["+model+"]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`[{name: X9, vendor: "zz"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, wantErr string
		hasX9         bool
	}{
		{path: ""},
		{path: good, hasX9: true},
		{path: filepath.Join(dir, "missing.yaml"), wantErr: "missing.yaml"},
		{path: bad, wantErr: bad + `: hwdb: models[0] "X9"`},
	} {
		db, err := OpenFile(tt.path)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tt.path, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tt.path, err)
		}
		if _, ok := db.ModelByName("X9"); ok != tt.hasX9 {
			t.Errorf("%q: model X9 present=%t, want %t", tt.path, ok, tt.hasX9)
		}
	}
}
