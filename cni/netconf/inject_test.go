package netconf

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// sriovList is a typical SR-IOV attachment: an interface plugin, tuning, and
// a plugin holding the runtimeConfig capabilities.
const sriovList = `{
  "cniVersion": "1.0.0",
  "name": "sriov-net",
  "plugins": [
    {"type": "host-device", "ipam": {"type": "static"}, "capabilities": {"ips": true, "mac": false}},
    {"type": "tuning", "sysctl": {"net.ipv4.conf.IFNAME.arp_notify": "1"}, "capabilities": {"mac": true}},
    {"type": "bandwidth", "capabilities": {"bandwidth": true, "portMappings": false}}
  ]
}`

func TestSpec4_1_2_1_CapabilityCheck(t *testing.T) {
	const withAll = `{"name":"net-b","plugins":[
	  {"type":"host-device","capabilities":{"ips":true}},
	  {"type":"ib-sriov","capabilities":{"infinibandGUID":true}},
	  {"type":"tuning","capabilities":{"mac":true}},
	  {"type":"portmap","capabilities":{"portMappings":true}},
	  {"type":"bandwidth","capabilities":{"bandwidth":true}}]}`
	const withNone = `{"name":"net-b","plugins":[
	  {"type":"host-device","capabilities":{"ips":false,"mac":false,"infinibandGUID":false,"portMappings":false,"bandwidth":false}},
	  {"type":"tuning"}]}`
	tests := []struct {
		section, capability, selectionKey string
	}{
		{"4.1.2.1.3.2", "ips", "ips"},
		{"4.1.2.1.4.2", "mac", "mac"},
		{"4.1.2.1.4.2 v1.2 infiniband-guid", "infinibandGUID", "infiniband-guid"},
		{"4.1.2.1.7.2", "portMappings", "portMappings"},
		{"4.1.2.1.8.2", "bandwidth", "bandwidth"},
	}
	for _, tt := range tests {
		t.Run(tt.section+" "+tt.selectionKey+" declared", func(t *testing.T) {
			if err := mustParse(t, withAll, "net-b").Check(tt.capability); err != nil {
				t.Errorf("Check(%q) = %v, want nil", tt.capability, err)
			}
		})
		t.Run(tt.section+" "+tt.selectionKey+" not declared", func(t *testing.T) {
			err := mustParse(t, withNone, "net-b").Check(tt.capability)
			var capErr *CapabilityError
			if !errors.As(err, &capErr) {
				t.Fatalf("Check(%q) = %v, want a *CapabilityError", tt.capability, err)
			}
			if capErr.Capability != tt.capability || capErr.SelectionKey() != tt.selectionKey || capErr.Network != "net-b" {
				t.Errorf("got %+v key %q, want capability %q key %q", capErr, capErr.SelectionKey(), tt.capability, tt.selectionKey)
			}
			for _, want := range []string{`network "net-b"`, `"` + tt.capability + `"`, `selection key "` + tt.selectionKey + `"`, "test net-b"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
		})
	}
}

func TestCheckReportsEveryMissingCapability(t *testing.T) {
	d := mustParse(t, sriovList, "")
	if err := d.Check(); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
	if err := d.Check("ips", "mac", "bandwidth"); err != nil {
		t.Errorf("capabilities declared by different plugins: Check = %v, want nil", err)
	}
	err := d.Check("ips", "portMappings", "infinibandGUID")
	if err == nil || !strings.Contains(err.Error(), `"portMappings"`) || !strings.Contains(err.Error(), `"infiniband-guid"`) ||
		strings.Contains(err.Error(), `"ips"`) {
		t.Errorf("Check = %v, want errors for portMappings and infiniband-guid only", err)
	}
}

func TestCapabilitiesUnion(t *testing.T) {
	got := mustParse(t, sriovList, "").Capabilities()
	want := map[string]bool{"ips": true, "mac": true, "bandwidth": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Capabilities() = %v, want %v (true in any plugin, false ones left out)", got, want)
	}
}

// fieldOf returns plugin i's key as a Go string, or "<absent>".
func fieldOf(t *testing.T, d *Delegate, i int, key string) string {
	t.Helper()
	raw, ok := d.Plugins[i].Fields[key]
	if !ok {
		return "<absent>"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("plugins[%d].%s = %s, not a string", i, key, raw)
	}
	return s
}

func TestInjectDevice(t *testing.T) {
	const vf = "0000:3b:02.1"
	list := func(hostDeviceKeys string) string {
		return `{"cniVersion":"1.0.0","name":"hd","plugins":[{"type":"host-device"` + hostDeviceKeys +
			`},{"type":"tuning","mtu":9000}]}`
	}
	const sf, sfPath = "mlx5_core.sf.4", "/sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/mlx5_core.sf.4"
	tests := []struct {
		// deviceID is "ID" or, for a device with a kernel path, "ID|path".
		name, config, deviceID        string
		wantDeviceID, wantPCI         [2]string // per plugin: host-device, tuning
		wantHostDeviceKey, wantKeyVal string
	}{
		{"a scalable function into host-device by kernelpath", list(``), sf + "|" + sfPath,
			[2]string{sf, sf}, [2]string{"<absent>", "<absent>"}, "kernelpath", sfPath},
		{"a scalable function replaces the NAD's pciBusID", list(`,"pciBusID":"0000:00:1f.6"`), sf + "|" + sfPath,
			[2]string{sf, sf}, [2]string{"<absent>", "<absent>"}, "kernelpath", sfPath},
		{"host-device naming a device keeps it for a scalable function", list(`,"device":"eth1"`), sf + "|" + sfPath,
			[2]string{sf, sf}, [2]string{"<absent>", "<absent>"}, "kernelpath", "<absent>"},
		{"allocated device into host-device by pciBusID", list(``), vf,
			[2]string{vf, vf}, [2]string{vf, "<absent>"}, "", ""},
		{"host-device naming a device keeps it", list(`,"device":"eth1"`), vf,
			[2]string{vf, vf}, [2]string{"<absent>", "<absent>"}, "device", "eth1"},
		{"host-device naming hwaddr keeps it", list(`,"hwaddr":"02:00:00:00:00:01"`), vf,
			[2]string{vf, vf}, [2]string{"<absent>", "<absent>"}, "hwaddr", "02:00:00:00:00:01"},
		{"host-device naming kernelpath keeps it", list(`,"kernelpath":"/sys/devices/pci0000:00/0000:00:19.0"`), vf,
			[2]string{vf, vf}, [2]string{"<absent>", "<absent>"}, "kernelpath", "/sys/devices/pci0000:00/0000:00:19.0"},
		{"allocation overwrites the NAD's pciBusID", list(`,"pciBusID":"0000:00:1f.6","deviceID":"0000:00:1f.6"`), vf,
			[2]string{vf, vf}, [2]string{vf, "<absent>"}, "", ""},
		{"allocation overwrites a pciBusID spelled in another case", list(`,"PCIBusID":"0000:00:1f.6"`), vf,
			[2]string{vf, vf}, [2]string{vf, "<absent>"}, "PCIBusID", "<absent>"},
		{"no allocation leaves the NAD's static device alone", list(`,"pciBusID":"0000:00:1f.6","deviceID":"0000:00:1f.6"`), "",
			[2]string{"0000:00:1f.6", "<absent>"}, [2]string{"0000:00:1f.6", "<absent>"}, "", ""},
		{"no allocation adds nothing", list(``), "",
			[2]string{"<absent>", "<absent>"}, [2]string{"<absent>", "<absent>"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, kernelPath, _ := strings.Cut(tt.deviceID, "|")
			d, err := mustParse(t, tt.config, "").Inject(Injection{DeviceID: id, KernelPath: kernelPath})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if got := fieldOf(t, d, i, "deviceID"); got != tt.wantDeviceID[i] {
					t.Errorf("plugins[%d].deviceID = %s, want %s", i, got, tt.wantDeviceID[i])
				}
				if got := fieldOf(t, d, i, "pciBusID"); got != tt.wantPCI[i] {
					t.Errorf("plugins[%d].pciBusID = %s, want %s", i, got, tt.wantPCI[i])
				}
			}
			if tt.wantHostDeviceKey != "" {
				if got := fieldOf(t, d, 0, tt.wantHostDeviceKey); got != tt.wantKeyVal {
					t.Errorf("host-device %s = %s, want %s", tt.wantHostDeviceKey, got, tt.wantKeyVal)
				}
			}
			libcniList(t, d)
		})
	}
}

func TestInjectDeviceInfoFile(t *testing.T) {
	const path = "/var/run/k8s.cni.cncf.io/devinfo/cni/sriov-net-abc-net1-device-info.json"
	d, err := mustParse(t, sriovList, "").Inject(Injection{DeviceInfoFile: path})
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.Plugins {
		if got := fieldOf(t, d, i, "CNIDeviceInfoFile"); got != path {
			t.Errorf("plugins[%d].CNIDeviceInfoFile = %s, want %s", i, got, path)
		}
		if got := fieldOf(t, d, i, "deviceID"); got != "<absent>" {
			t.Errorf("plugins[%d].deviceID = %s without an allocation", i, got)
		}
	}
}

func TestSpec4_1_2_1_6_2_CNIArgsMerge(t *testing.T) {
	pod := map[string]json.RawMessage{"spoofchk": json.RawMessage(`"on"`), "trust": json.RawMessage(`"on"`)}
	conf := func(args string) string { return `{"name":"net-b","type":"sriov"` + args + `}` }
	tests := []struct {
		name, config string
		pod          map[string]json.RawMessage
		wantArgs     string
		wantErr      string
	}{
		{"4.1.2.1.6.2 args added when the NAD has none", conf(``), pod,
			`{"cni":{"spoofchk":"on","trust":"on"}}`, ""},
		{"4.1.2.1.6.2 pod cni-args win over the NAD's args", conf(`,"args":{"cni":{"spoofchk":"off","vlan":5}}`), pod,
			`{"cni":{"spoofchk":"on","trust":"on","vlan":5}}`, ""},
		{"CONVENTIONS.md other args namespaces kept", conf(`,"args":{"labels":{"app":"x"},"cni":null}`), pod,
			`{"cni":{"spoofchk":"on","trust":"on"},"labels":{"app":"x"}}`, ""},
		{"no cni-args leaves NAD args alone", conf(`,"args":{"cni":{"vlan":5}}`), nil,
			`{"cni":{"vlan":5}}`, ""},
		{"NAD args not an object", conf(`,"args":"vlan=5"`), pod, "", `plugins[0] (sriov): args: want a JSON object, got "vlan=5"`},
		{"NAD args.cni not an object", conf(`,"args":{"cni":[1]}`), pod, "", `args.cni: want a JSON object, got [1]`},
		{"pod value not JSON", conf(``), map[string]json.RawMessage{"spoofchk": json.RawMessage(`on`)}, "", `cni-args "spoofchk": invalid JSON on`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := mustParse(t, tt.config, "").Inject(Injection{CNIArgs: tt.pod})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Inject error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, d.Plugins[0].Fields["args"], []byte(tt.wantArgs))
		})
	}
}

func TestInjectCNIArgsIntoEveryPlugin(t *testing.T) {
	d, err := mustParse(t, sriovList, "").Inject(Injection{CNIArgs: map[string]json.RawMessage{"k": json.RawMessage(`1`)}})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range d.Plugins {
		assertJSONEqual(t, p.Fields["args"], []byte(`{"cni":{"k":1}}`))
		if p.Type != d.Plugins[i].Type {
			t.Errorf("plugins[%d] type changed", i)
		}
	}
}

func TestInjectDoesNotAlterOriginal(t *testing.T) {
	d := mustParse(t, `{"cniVersion":"1.0.0","name":"n","plugins":[
	  {"type":"host-device","args":{"cni":{"a":1}},"capabilities":{"ips":true}},{"type":"tuning"}]}`, "")
	before, err := d.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	snapshot := *d
	snapshot.Plugins = append([]Plugin(nil), d.Plugins...)
	out, err := d.Inject(Injection{
		DeviceID:       "0000:3b:02.1",
		DeviceInfoFile: "/x.json",
		CNIArgs:        map[string]json.RawMessage{"a": json.RawMessage(`2`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	out.Plugins[0].Capabilities["mac"] = true
	out.Plugins[1].Fields["extra"] = json.RawMessage(`1`)
	after, err := d.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) || !reflect.DeepEqual(*d, snapshot) || d.Plugins[0].Capabilities["mac"] {
		t.Errorf("Inject or editing its result changed the original:\nbefore %s\nafter  %s", before, after)
	}
}
