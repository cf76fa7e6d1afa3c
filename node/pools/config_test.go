package pools_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestParseErrors: every mistake is reported, each naming its entry,
// field and value. (YAML input reaches the checks with its keys sorted.)
func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		want         []string
	}{
		{"reversed range", `
resourceList:
  - {resourceName: sriov_a, selectors: {vendors: ["8086"]}}
  - {resourceName: sriov_b, selectors: {vendors: ["8086"]}}
  - resourceName: sriov_dpdk
    selectors: [{pfNames: [enp59s0f0, "enp59s0f0#3-1"]}]`,
			[]string{`resourceList[2] "sriov_dpdk": selectors[0].pfNames[1]: "enp59s0f0#3-1": range 3-1 is reversed`}},
		{"bad ranges", `
resourceList:
  - resourceName: r
    selectors:
      pfNames: ["p#", "p#a", "p#1,,2", "p#-1", "p#1-", "p#70000", "p#1-2-3", "toolonginterface0#1", "enp59s0f*", "ens(1|2)#0-3"]
      rootDevices: ["0000:3b:00.0#1-0", "3b:00.0#1"]`,
			[]string{
				`resourceList[0] "r": selectors.pfNames[0]: "p#": no VF indices after '#'`,
				`resourceList[0] "r": selectors.pfNames[1]: "p#a": "a" in "a" is not a VF index (0-65534)`,
				`resourceList[0] "r": selectors.pfNames[2]: "p#1,,2": "" in "" is not a VF index (0-65534)`,
				`resourceList[0] "r": selectors.pfNames[3]: "p#-1": "" in "-1" is not a VF index (0-65534)`,
				`resourceList[0] "r": selectors.pfNames[4]: "p#1-": "" in "1-" is not a VF index (0-65534)`,
				`resourceList[0] "r": selectors.pfNames[5]: "p#70000": "70000" in "70000" is not a VF index (0-65534)`,
				`resourceList[0] "r": selectors.pfNames[6]: "p#1-2-3": "2-3" in "1-2-3" is not a VF index (0-65534)`,
				`resourceList[0] "r": selectors.pfNames[7]: "toolonginterface0#1": not an interface name (1-15 characters, no '/', ':' or space)`,
				`resourceList[0] "r": selectors.pfNames[8]: "enp59s0f*": interface names are matched exactly, not as patterns: list each PF's name`,
				`resourceList[0] "r": selectors.pfNames[9]: "ens(1|2)#0-3": interface names are matched exactly, not as patterns: list each PF's name`,
				`resourceList[0] "r": selectors.rootDevices[0]: "0000:3b:00.0#1-0": range 1-0 is reversed`,
				`resourceList[0] "r": selectors.rootDevices[1]: "3b:00.0#1": not a PCI address such as 0000:3b:02.1 (domain:bus:device.function)`,
			}},
		{"claim drivers", `
resourceList:
  - resourceName: one
    mode: dra
    claimDrivers: [vfio-pci, "bad/driver"]
    selectors: [{drivers: [iavf, vfio-pci]}, {drivers: [iavf]}, {vendors: ["8086"]}]`,
			[]string{
				`resourceList[0] "one": claimDrivers[1]: "bad/driver": not a driver name`,
				`resourceList[0] "one": claimDrivers: "vfio-pci": selectors[1] matches drivers ["iavf"] only: add it there, or a VF bound to it for a claim leaves the pool`,
			}},
		{"one variable for two resources", `
resourceList:
  - {resourceName: sriov-a, selectors: {vendors: ["8086"]}}
  - {resourceName: sriov_a, selectors: {vendors: ["8086"]}}`,
			[]string{`resourceList[1] "sriov_a": resourceName: "sriov_a": its devices' variable PCIDEVICE_INTEL_COM_SRIOV_A is already resourceList[0]'s`}},
		{"resource names", `
resourceList:
  - {selectors: {vendors: ["8086"]}}
  - {resourceName: "bad/name", selectors: {vendors: ["8086"]}}
  - {resourceName: "-dash", selectors: {vendors: ["8086"]}}
  - {resourceName: ok, resourcePrefix: Intel.com, selectors: {vendors: ["8086"]}}
  - {resourceName: ok, resourcePrefix: kubernetes.io, selectors: {vendors: ["8086"]}}
  - {resourceName: ok, resourcePrefix: requests.example.com, selectors: {vendors: ["8086"]}}
  - {resourceName: dup, selectors: {vendors: ["8086"]}}
  - {resourceName: dup, resourcePrefix: intel.com, selectors: {vendors: ["8086"]}}
  - {resourceName: dup, resourcePrefix: example.com, selectors: {vendors: ["8086"]}}`,
			[]string{
				`resourceList[0]: resourceName: missing`,
				`resourceList[1] "bad/name": resourceName: "bad/name": want at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
				`resourceList[2] "-dash": resourceName: "-dash": want at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
				`resourceList[3] "ok": resourcePrefix: "Intel.com": not a DNS subdomain (lower-case letters, digits, '-' and '.', such as example.com)`,
				`resourceList[4] "ok": resourcePrefix: "kubernetes.io": reserved by Kubernetes: not an extended resource prefix`,
				`resourceList[5] "ok": resourcePrefix: "requests.example.com": reserved by Kubernetes: not an extended resource prefix`,
				`resourceList[7] "dup": resourceName: "dup": intel.com/dup is already the name of resourceList[6]`,
			}},
		{"addresses and IDs", `
resourceList:
  - resourceName: r
    additionalInfo: {"*": {a: b}, "0000:3b:01.0": {c: d}, "eth0": {e: f}}
    selectors:
      vendors: ["80z6", "08086", "0x8086"]
      devices: [""]
      pciAddresses: ["03:02.0", "0000:3b:20.0", "0000:3b:02.8", "0000:3B:02.1"]`,
			[]string{
				`resourceList[0] "r": additionalInfo: "eth0": want "*" or a device's PCI address: not a PCI address such as 0000:3b:02.1 (domain:bus:device.function)`,
				`resourceList[0] "r": selectors.vendors[0]: "80z6": not a 4-digit hex PCI ID`,
				`resourceList[0] "r": selectors.vendors[1]: "08086": not a 4-digit hex PCI ID`,
				`resourceList[0] "r": selectors.devices[0]: "": not a 4-digit hex PCI ID`,
				`resourceList[0] "r": selectors.pciAddresses[0]: "03:02.0": not a PCI address such as 0000:3b:02.1 (domain:bus:device.function)`,
				`resourceList[0] "r": selectors.pciAddresses[1]: "0000:3b:20.0": device 20 is out of range 00-1f`,
				`resourceList[0] "r": selectors.pciAddresses[2]: "0000:3b:02.8": function 8 is out of range 0-7`,
			}},
		{"values hwnet cannot evaluate", `
resourceList:
  - resourceName: r
    selectors: {drivers: ["a/b"], pKeys: ["0x10000", "fff"], acpiIndexes: ["-1"], ddpProfiles: [" "]}
  - {resourceName: s, resourcePrefix: "` + strings.Repeat("a", 245) + `", selectors: {drivers: [iavf]}}`,
			[]string{
				`resourceList[0] "r": selectors.drivers[0]: "a/b": not a driver name`,
				`resourceList[0] "r": selectors.ddpProfiles[0]: " ": empty`,
				`resourceList[0] "r": selectors.pKeys[0]: "0x10000": not a 16-bit hex partition key such as 0x7fff`,
				`resourceList[0] "r": selectors.acpiIndexes[0]: "-1": not an ACPI index (a decimal number)`,
				`resourceList[1] "s": resourcePrefix: "` + strings.Repeat("a", 245) + `": longer than 244 characters`,
			}},
		{"enumerations", `
resourceList:
  - {resourceName: a, deviceType: vfio, selectors: {vendors: ["8086"]}}
  - {resourceName: b, allocationPolicy: random, mode: cdi, selectors: {vendors: ["8086"], vdpaType: vdpa, linkTypes: [eth]}}`,
			[]string{
				`resourceList[0] "a": deviceType: "vfio": want "netDevice", "accelerator" or "auxNetDevice"`,
				`resourceList[1] "b": allocationPolicy: "random": want "pack" or "spread"`,
				`resourceList[1] "b": mode: "cdi": want "devicePlugin" or "dra"`,
				`resourceList[1] "b": selectors.linkTypes[0]: "eth": want "ether" (or "ethernet") or "infiniband"`,
				`resourceList[1] "b": selectors.vdpaType: "vdpa": want "vhost" or "virtio"`,
			}},
		{"empty selectors", `
resourceList:
  - {resourceName: a}
  - {resourceName: b, selectors: []}
  - {resourceName: c, selectors: {}}
  - {resourceName: d, selectors: [{needVhostNet: true}]}
  - {resourceName: e, selectors: "8086"}`,
			[]string{
				`resourceList[0] "a": selectors: missing: want a selector object or a list of them`,
				`resourceList[1] "b": selectors: []: want a non-empty list of selector objects`,
				`resourceList[2] "c": selectors: {}: selects nothing in particular: name at least one field to match, such as vendors, devices, drivers, pfNames or models`,
				`resourceList[3] "d": selectors[0]: {"needVhostNet":true}: selects nothing in particular: name at least one field to match, such as vendors, devices, drivers, pfNames or models`,
				`resourceList[4] "e": selectors: "8086": want a selector object or a list of them, got a string`,
			}},
		{"unknown fields", `
apiVersion: v1
resourceList:
  - resourceName: a
    isRdma: true
    selectors: {vendor: ["8086"], ifNames: [eth0], resourcePrefix: x}`,
			[]string{
				`apiVersion: unknown field (this looks like a Kubernetes ConfigMap: pass the config.json it holds)`,
				`resourceList[0] "a": isRdma: unknown field (a selector field: put it in each selector object; sriovdp ignores it here)`,
				`resourceList[0] "a": selectors.ifNames: unknown field (an sriovdp 1.x selector: use pfNames)`,
				`resourceList[0] "a": selectors.resourcePrefix: unknown field (a resourceList entry field, not a selector field)`,
				`resourceList[0] "a": selectors.vendor: unknown field`,
			}},
		{"fields of another device type", `
resourceList:
  - {resourceName: a, deviceType: accelerator, selectors: {vendors: ["8086"], pfNames: [eth0], isRdma: true}}
  - {resourceName: b, deviceType: auxNetDevice, selectors: {auxTypes: [sf], vdpaType: vhost}}`,
			[]string{
				`resourceList[0] "a": selectors.isRdma: not a selector field of deviceType "accelerator"`,
				`resourceList[0] "a": selectors.pfNames: not a selector field of deviceType "accelerator"`,
				`resourceList[1] "b": selectors.vdpaType: not a selector field of deviceType "auxNetDevice"`,
			}},
		{"per-resource flags", `
resourceList:
  - resourceName: a
    selectors: [{vendors: ["8086"], needVhostNet: true}, {vendors: ["15b3"]}]
  - resourceName: b
    selectors: [{vendors: ["15b3"], isRdma: true, vdpaType: virtio}]`,
			[]string{
				`resourceList[0] "a": selectors[1].needVhostNet: false: differs from selectors[0] (true): hwnet applies needVhostNet to the whole resource; split the entry into one resource per value`,
				`resourceList[1] "b": selectors[0].vdpaType: "virtio": isRdma and vdpaType are mutually exclusive`,
			}},
		{"types", `
resourceList:
  - {resourceName: a, excludeTopology: "yes", cdi: "on", selectors: {vendors: "8086", devices: [1889], isRdma: 1}}
  - [not, an, object]`,
			[]string{
				`resourceList[0] "a": cdi: "on": want true or false`,
				`resourceList[0] "a": excludeTopology: "yes": want true or false`,
				`resourceList[0] "a": selectors.devices: [1889]: want a list of strings (quote PCI IDs in YAML: "8086")`,
				`resourceList[0] "a": selectors.isRdma: 1: want true or false`,
				`resourceList[0] "a": selectors.vendors: "8086": want a list of strings (quote PCI IDs in YAML: "8086")`,
				`resourceList[1]: want an object, got a list`,
				`resourceList[1]: resourceName: missing`,
				`resourceList[1]: selectors: missing: want a selector object or a list of them`,
			}},
		{"tags", `
tags:
  - {name: fabric-a, selectors: {pfNames: [enp59s0f0]}}
  - {name: fabric-a, selectors: {pfNames: [enp62s0f0]}}
  - {name: "bad tag", selectors: {vendors: ["8086"], needVhostNet: true, tags: [fabric-a]}}
  - {selectors: {vendors: ["8086"]}}
resourceList:
  - {resourceName: a, selectors: {tags: [fabric-a, fabric-b]}}`,
			[]string{
				`tags[1] "fabric-a": name: "fabric-a": declared twice`,
				`tags[2] "bad tag": name: "bad tag": want at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
				`tags[2] "bad tag": selectors.needVhostNet: not a selector field of a tag`,
				`tags[2] "bad tag": selectors.tags: not a selector field of a tag`,
				`tags[3]: name: missing`,
				`resourceList[0] "a": selectors.tags[1]: "fabric-b": no such tag in the top-level tags list`,
			}},
		{"repeated key", `{"resourceList": [{"resourceName": "a", "resourcename": "b", "selectors": {"vendors": ["8086"]}}]}`,
			[]string{`resourceList[0] "a": resourcename: given twice`}},
		{"no resources", `tags: []`, []string{`resourceList: missing: the config declares no resource`}},
		{"empty", " \n", []string{`config is empty`}},
		{"trailing comma", "{\"resourceList\": [\n  {\"resourceName\": \"a\",}\n]}", []string{
			`config is not valid JSON: line 2, column 24: invalid character '}' looking for beginning of object key string`}},
		{"trailing garbage", "{\"resourceList\": []}x", []string{
			`config is not valid JSON: line 1, column 21: invalid character 'x' after top-level value`}},
		{"a list", "- resourceName: a\n", []string{`config is a list, not an object with a resourceList`}},
		{"null", "null\n", []string{`config is null, not an object with a resourceList`}},
		{"bad YAML", "resourceList:\n  - a: [b\n", []string{
			`config is neither JSON nor YAML: yaml: line 2: did not find expected ',' or ']'`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := pools.Parse([]byte(tc.config))
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestParseDefaults: what an entry leaves out gets sriovdp's defaults (and
// hwnet's "pack"); the resource-wide flags come from the selectors.
func TestParseDefaults(t *testing.T) {
	cfg := mustParse(t, `{"resourceList": [
		{"resourceName": "plain", "selectors": {"vendors": ["8086"]}},
		{"resourceName": "full", "resourcePrefix": "example.com", "deviceType": "accelerator",
		 "excludeTopology": true, "allocationPolicy": "spread", "mode": "dra",
		 "additionalInfo": {"*": {"token": "t"}, "0000:3B:01.0": {"token": "u"}},
		 "selectors": [{"vendors": ["8086"]}]},
		{"resourceName": "vdpa", "selectors": [{"devices": ["101e"], "vdpaType": "vhost", "needVhostNet": true},
		                                       {"devices": ["101e"], "vdpaType": "vhost", "needVhostNet": true}]},
		{"resourceName": "rdma", "selectors": {"linkTypes": ["infiniband"], "IsRdma": true}},
		{"resourceName": "cdi", "cdi": true, "selectors": {"drivers": ["vfio-pci"]}},
		{"resourceName": "both", "mode": "dra", "claimDrivers": ["vfio-pci"], "selectors": {"drivers": ["iavf", "vfio-pci"]}}
	]}`)
	strip := func(r pools.Resource) pools.Resource { r.Selectors = nil; return r }
	want := []pools.Resource{
		{Prefix: "intel.com", Name: "plain", DeviceType: pools.NetDevice, Policy: pools.Pack, Mode: pools.DevicePlugin, Index: 0},
		{Prefix: "example.com", Name: "full", DeviceType: pools.Accelerator, ExcludeTopology: true, Policy: pools.Spread, Mode: pools.DRA,
			AdditionalInfo: map[string]map[string]string{"*": {"token": "t"}, "0000:3b:01.0": {"token": "u"}}, Index: 1},
		{Prefix: "intel.com", Name: "vdpa", DeviceType: pools.NetDevice, Policy: pools.Pack, Mode: pools.DevicePlugin, Index: 2,
			VDPAType: "vhost", NeedVhostNet: true},
		{Prefix: "intel.com", Name: "rdma", DeviceType: pools.NetDevice, Policy: pools.Pack, Mode: pools.DevicePlugin, Index: 3, IsRDMA: true},
		{Prefix: "intel.com", Name: "cdi", DeviceType: pools.NetDevice, Policy: pools.Pack, Mode: pools.DevicePlugin, Index: 4, CDI: true},
		{Prefix: "intel.com", Name: "both", DeviceType: pools.NetDevice, Policy: pools.Pack, Mode: pools.DRA, Index: 5, ClaimDrivers: []string{"vfio-pci"}},
	}
	for i, r := range cfg.Resources {
		if !reflect.DeepEqual(strip(r), want[i]) {
			t.Errorf("resource %d:\n got %+v\nwant %+v", i, strip(r), want[i])
		}
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings %q, want none", cfg.Warnings)
	}
}

// TestParseSelectors: one object and a list of one give the same
// selector; ranges, IDs, addresses and link types are read as sriovdp
// means them.
func TestParseSelectors(t *testing.T) {
	object := mustParse(t, `{"resourceList": [{"resourceName": "a", "selectors": {
		"vendors": ["8086", "0x15B3"], "pciAddresses": ["0000:3B:01.0"],
		"pfNames": ["enp59s0f0#0,2-7,9", "ens1"], "rootDevices": ["0000:3e:00.0#1-2"],
		"linkTypes": ["ether", "infiniband"], "models": ["E810-C"]}}]}`)
	list := mustParse(t, `
resourceList:
  - resourceName: a
    selectors:
      - vendors: ["8086", "0x15B3"]
        pciAddresses: ["0000:3B:01.0"]
        pfNames: ["enp59s0f0#0,2-7,9", ens1]
        rootDevices: ["0000:3e:00.0#1-2"]
        linkTypes: [ether, infiniband]
        models: [E810-C]`)
	want := pools.Selector{
		Vendors:      []hwdb.PCIID{0x8086, 0x15b3},
		PCIAddresses: []string{"0000:3b:01.0"},
		PFNames: []pools.FunctionSet{
			{PF: "enp59s0f0", VFs: []pools.IndexRange{{0, 0}, {2, 7}, {9, 9}}},
			{PF: "ens1"},
		},
		RootDevices: []pools.FunctionSet{{PF: "0000:3e:00.0", VFs: []pools.IndexRange{{1, 2}}}},
		LinkTypes:   []hwdb.LinkType{hwdb.Ethernet, hwdb.InfiniBand},
		Models:      []string{"E810-C"},
	}
	for name, cfg := range map[string]*pools.Config{"object": object, "list": list} {
		sels := cfg.Resources[0].Selectors
		if len(sels) != 1 || !selectorEqual(sels[0], want) {
			t.Errorf("%s: selectors %+v, want [%+v]", name, sels, want)
		}
	}
}

// selectorEqual compares the exported fields of two selectors.
func selectorEqual(a, b pools.Selector) bool {
	return reflect.DeepEqual(a.Vendors, b.Vendors) && reflect.DeepEqual(a.PCIAddresses, b.PCIAddresses) &&
		reflect.DeepEqual(a.PFNames, b.PFNames) && reflect.DeepEqual(a.RootDevices, b.RootDevices) &&
		reflect.DeepEqual(a.LinkTypes, b.LinkTypes) && reflect.DeepEqual(a.Models, b.Models)
}

// TestParseUnevaluable: selectors hwnet cannot evaluate are accepted, with
// a warning per selector object saying why it matches nothing, as are keys
// that change nothing; an auxNetDevice pool is evaluated.
func TestParseUnevaluable(t *testing.T) {
	cfg := mustParse(t, `{"resourceList": [
		{"resourceName": "a", "selectors": [{"vendors": ["8086"]}, {"ddpProfiles": ["GTP"]}]},
		{"resourceName": "b", "selectors": {"linkTypes": ["infiniband"], "acpiIndexes": ["7"]}},
		{"resourceName": "c", "deviceType": "accelerator", "selectors": {"acpiIndexes": ["101"]}},
		{"resourceName": "d", "deviceType": "auxNetDevice", "selectors": {"auxTypes": ["sf"], "pfNames": ["p0#1-5"]}},
		{"resourceName": "e", "mode": "dra", "cdi": true, "selectors": {"drivers": ["vfio-pci"]}},
		{"resourceName": "f", "claimDrivers": ["vfio-pci"], "selectors": {"vendors": ["8086"]}}
	]}`)
	want := []string{
		`resourceList[0] "a": selectors[1].ddpProfiles: hwnet does not read DDP profiles; this selector object matches no device`,
		`resourceList[1] "b": selectors.acpiIndexes: hwnet does not read ACPI indexes; this selector object matches no device`,
		`resourceList[2] "c": selectors.acpiIndexes: hwnet does not read ACPI indexes; this selector object matches no device`,
		`resourceList[4] "e": cdi: a DRA pool always hands its devices out through CDI; the key only changes a device plugin pool`,
		`resourceList[5] "f": claimDrivers: only a DRA claim asks for a driver; a device plugin pool's devices stay on the one they have`,
	}
	if !reflect.DeepEqual(cfg.Warnings, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(cfg.Warnings, "\n"), strings.Join(want, "\n"))
	}
}

// TestCheckModels: model names are checked against the hardware database,
// ignoring case, which the admin's additions extend.
func TestCheckModels(t *testing.T) {
	cfg := mustParse(t, `
tags:
  - {name: lab, selectors: {models: [X9000]}}
resourceList:
  - {resourceName: a, selectors: [{models: [e810-c]}, {models: [ConnectX-6, E999]}]}`)
	err := cfg.CheckModels(vnodetest.OpenDB(t))
	want := `tags[0] "lab": selectors.models[0]: "X9000": not a model in the hardware database` + "\n" +
		`resourceList[0] "a": selectors[1].models[1]: "E999": not a model in the hardware database`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	var fe *pools.FieldError
	if !errors.As(err, &fe) || fe.Entry != `tags[0] "lab"` || fe.Field != "selectors.models[0]" || fe.Value != `"X9000"` {
		t.Errorf("first error %+v, want a FieldError naming tags[0], selectors.models[0] and \"X9000\"", fe)
	}
	db, err := hwdb.Open(
		hwdb.Model{Name: "X9000", Family: "Lab", Vendor: 0x1234, PFDevice: 0x0001, VFDevice: 0x0002,
			PFDrivers: []string{"x"}, VFDrivers: []string{"xvf"}, MaxVFs: 8, LinkTypes: []hwdb.LinkType{hwdb.Ethernet}},
		hwdb.Model{Name: "E999", Family: "Lab", Vendor: 0x1234, PFDevice: 0x0003, VFDevice: 0x0004,
			PFDrivers: []string{"x"}, VFDrivers: []string{"xvf"}, MaxVFs: 8, LinkTypes: []hwdb.LinkType{hwdb.Ethernet}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckModels(db); err != nil {
		t.Errorf("with the admin's models: %v", err)
	}
}

// TestLoad: Load names the file in its errors.
func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "config.json")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(`{"resourceList": [{"resourceName": "a", "selectors": {"drivers": ["iavf"]}}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("resourceList:\n  - resourceName: a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if cfg, err := pools.Load(good); err != nil || cfg.Resources[0].FullName() != "intel.com/a" {
		t.Errorf("Load(%s): %+v, %v", good, cfg, err)
	}
	if _, err := pools.Load(bad); err == nil || err.Error() != "config "+bad+`: resourceList[0] "a": selectors: missing: want a selector object or a list of them` {
		t.Errorf("Load(%s): %v", bad, err)
	}
	if _, err := pools.Load(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: %v, want ErrNotExist", err)
	}
}
