package status

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/node/devinfo"
)

// The two lists of section 5.4, as the specification prints them.
const (
	spec5_4SingleGateway = `[
        {
          "name": "cluster-wide-default",
          "interface": "eth5",
          "ips": [ "192.0.2.2/24", "2001:db8::2230/32" ],
          "mac": "02:11:22:33:44:54",
          "default-route": ["192.0.2.1"],
          "default": true
        },
        {
          "name": "some-network",
          "interface": "eth1",
          "ips": [ "192.0.2.2/24", "2001:db8::2234/32" ],
          "mac": "02:11:22:33:44:55",
          "dns": {
            "nameservers": [ "192.0.2.1", "2001:db8:4860::8888" ],
            "search": [ "eng.example.com", "example.com" ]
          }
        },
        {
          "name": "other-ns/an-ip-over-infiniband-network",
          "interface": "ib0",
        "ips": [ "198.51.100.1/24" ],
        "mac":
"80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22"
    }
]`
	spec5_4MultipleGateways = `[
        {
          "name": "cluster-wide-default",
          "interface": "eth5",
          "ips": [ "192.0.2.2/24", "2001:db8::2230/32" ],
          "mac": "02:11:22:33:44:54",
          "default-route":["192.0.2.1","2001:db8::1","2001:db8::2"],
          "default": true
        },
        {
          "name": "some-network",
          "interface": "eth1",
          "ips": [ "192.0.2.2/24", "2001:db8::2234/32" ],
          "mac": "02:11:22:33:44:55",
          "dns": {
            "nameservers": [ "192.0.2.1", "2001:db8:4860::8888" ],
            "search": [ "eng.example.com", "example.com" ]
          }
        },
        {
          "name": "other-ns/an-ip-over-infiniband-network",
          "interface": "ib0",
          "ips": [ "198.51.100.1/24" ],
          "mac":
"80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22"
        }
      ]`
)

// normalise returns a list's JSON with sorted keys and no spacing. The
// examples leave "default" out where it is false although 5.3.5 makes the
// key required, so a missing one is read as false.
func normalise(t *testing.T, value string) string {
	t.Helper()
	var list []map[string]any
	if err := json.Unmarshal([]byte(value), &list); err != nil {
		t.Fatalf("%v in %s", err, value)
	}
	for _, m := range list {
		if _, ok := m["default"]; !ok {
			m["default"] = false
		}
	}
	return mustJSON(t, list)
}

// TestSpec5_4Examples builds both examples of 5.4 from plugin results of
// three versions: the default network's default-route comes from its
// result's default routes, as hwnet reports it.
func TestSpec5_4Examples(t *testing.T) {
	someNetwork := `{"cniVersion": "0.4.0",
		"interfaces": [{"name": "vethb1", "mac": "ae:00:00:00:00:01"},
			{"name": "eth1", "mac": "02:11:22:33:44:55", "sandbox": "/var/run/netns/my-pod"}],
		"ips": [{"version": "4", "address": "192.0.2.2/24", "interface": 1},
			{"version": "6", "address": "2001:db8::2234/32", "interface": 1}],
		"dns": {"nameservers": ["192.0.2.1", "2001:db8:4860::8888"], "search": ["eng.example.com", "example.com"]}}`
	infiniband := `{"cniVersion": "1.1.0",
		"interfaces": [{"name": "ib0", "mac": "80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22",
			"sandbox": "/var/run/netns/my-pod"}],
		"ips": [{"address": "198.51.100.1/24", "interface": 0}]}`
	defaultNetwork := func(routes string) string {
		return `{"cniVersion": "1.0.0",
			"interfaces": [{"name": "eth5", "mac": "02:11:22:33:44:54", "sandbox": "/var/run/netns/my-pod"}],
			"ips": [{"address": "192.0.2.2/24", "gateway": "192.0.2.1", "interface": 0},
				{"address": "2001:db8::2230/32", "interface": 0}],
			"routes": ` + routes + `}`
	}
	tests := []struct {
		name, defaultRoutes, want string
	}{
		{"5.4 single gateway", `[{"dst": "0.0.0.0/0"}]`, spec5_4SingleGateway},
		{"5.4 multiple gateways", `[{"dst": "0.0.0.0/0", "gw": "192.0.2.1"},
			{"dst": "::/0", "gw": "2001:db8::1"}, {"dst": "::/0", "gw": "2001:db8::2"}]`, spec5_4MultipleGateways},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := parse(t, "1.0.0", defaultNetwork(tt.defaultRoutes))
			list := []NetworkStatus{
				fromResult(t, "cluster-wide-default", def, "eth0"),
				fromResult(t, "some-network", parse(t, "0.4.0", someNetwork), "net1"),
				fromResult(t, "other-ns/an-ip-over-infiniband-network", parse(t, "1.1.0", infiniband), "net2"),
			}
			list[0].Default = true
			gws, err := Gateways(def, "eth0")
			if err != nil {
				t.Fatal(err)
			}
			list[0].DefaultRoute = gws
			value, err := Encode(list)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := normalise(t, value), normalise(t, tt.want); got != want {
				t.Errorf("Encode =\n%s\nwant\n%s", got, want)
			}
			decoded, err := Decode(tt.want)
			if err != nil {
				t.Fatalf("Decode(5.4 example): %v", err)
			}
			if !reflect.DeepEqual(decoded, list) {
				t.Errorf("Decode(5.4 example) =\n%+v\nwant\n%+v", decoded, list)
			}
		})
	}
}

func fromResult(t *testing.T, name string, res types.Result, ifName string) NetworkStatus {
	t.Helper()
	st, err := FromResult(name, res, ifName)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestEncodeDecode(t *testing.T) {
	pci := devinfo.NewPCI(devinfo.PCI{PCIAddress: "0000:3b:02.1", PFPCIAddress: "0000:3b:00.0"})
	tests := []struct {
		name string
		list []NetworkStatus
		want string // normalised
	}{{
		name: "5 an empty list is a JSON list, not null",
		want: `[]`,
	}, {
		name: "5.3.5 default is written when false, v1.2 device-info",
		list: []NetworkStatus{
			{Name: "k8s-pod-network", Interface: "eth0", IPs: []string{"10.244.1.7/24"}, Default: true},
			{Name: "ns/sriov-a", Interface: "net1", MAC: "02:00:00:00:00:01", DeviceInfo: pci},
		},
		want: `[{"default":true,"interface":"eth0","ips":["10.244.1.7/24"],"name":"k8s-pod-network"},` +
			`{"default":false,"device-info":{"pci":{"pci-address":"0000:3b:02.1","pf-pci-address":"0000:3b:00.0"},"type":"pci","version":"1.1.0"},` +
			`"interface":"net1","mac":"02:00:00:00:00:01","name":"ns/sriov-a"}]`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value, err := Encode(tt.list)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(value, `"default"`) && len(tt.list) > 0 {
				t.Errorf("Encode left out the default key: %s", value)
			}
			if got := normaliseJSON(t, value); got != tt.want {
				t.Errorf("Encode =\n%s\nwant\n%s", got, tt.want)
			}
			back, err := Decode(value)
			if err != nil {
				t.Fatal(err)
			}
			if len(back) != len(tt.list) || (len(back) > 0 && !reflect.DeepEqual(back, tt.list)) {
				t.Errorf("Decode(Encode(list)) = %+v, want %+v", back, tt.list)
			}
		})
	}
}

// normaliseJSON re-encodes a JSON value with sorted keys and no spacing.
func normaliseJSON(t *testing.T, value string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		t.Fatalf("%v in %s", err, value)
	}
	return mustJSON(t, v)
}

func TestSpec5_3DecodeIgnoresExtensionKeys(t *testing.T) {
	list, err := Decode(`[{"name": "ns/a", "interface": "net1", "default": false, "org.example.vlan": 100}]`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []NetworkStatus{{Name: "ns/a", Interface: "net1"}}; !reflect.DeepEqual(list, want) {
		t.Errorf("Decode = %+v, want %+v", list, want)
	}
}

func TestSpec5_3InvalidLists(t *testing.T) {
	tests := []struct {
		name    string
		list    []NetworkStatus
		wantErr string
	}{{
		name:    "5.3.1 name is required",
		list:    []NetworkStatus{{Name: "default", Default: true}, {Interface: "net1"}},
		wantErr: Annotation + "[1]: name is empty",
	}, {
		name:    "5.3.4 mac needs interface",
		list:    []NetworkStatus{{Name: "ns/a", MAC: "02:00:00:00:00:01"}},
		wantErr: `[0]: "ns/a": mac "02:00:00:00:00:01" without interface`,
	}, {
		name:    "5.3.5 one default network",
		list:    []NetworkStatus{{Name: "default", Default: true}, {Name: "ns/a"}, {Name: "ns/b", Default: true}},
		wantErr: `[2] "ns/b": default is true, but ` + Annotation + `[0] "default" is already the default network`,
	}, {
		name:    "device-info spec: version required",
		list:    []NetworkStatus{{Name: "ns/a", Interface: "net1", DeviceInfo: &devinfo.DeviceInfo{Type: devinfo.TypePCI}}},
		wantErr: `[0]: "ns/a": device-info: `,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Encode(tt.list); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Encode error = %v, want one containing %q", err, tt.wantErr)
			}
			data, err := json.Marshal(tt.list)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Decode(string(data)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Decode error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestDecodeRejectsWhatIsNotAList(t *testing.T) {
	for _, value := range []string{``, `{"name": "a"}`, `[{"name": 1}]`, `[{"name": "a"}`} {
		if list, err := Decode(value); err == nil || !strings.Contains(err.Error(), Annotation) {
			t.Errorf("Decode(%q) = %+v, %v, want an error naming the annotation", value, list, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(spec5_4SingleGateway)
	f.Add(spec5_4MultipleGateways)
	f.Add(`[{"name":"a","default":true},{"name":"b","default":true}]`)
	f.Add(`[{"name":"ns/a","interface":"net1","device-info":{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.1"}}}]`)
	f.Fuzz(func(t *testing.T, value string) {
		list, err := Decode(value)
		if err != nil {
			return
		}
		again, err := Encode(list)
		if err != nil {
			t.Fatalf("Encode of a decoded list: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))): %v", value, err)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
