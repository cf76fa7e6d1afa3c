package status

import (
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	"github.com/containernetworking/cni/pkg/types/create"
)

// parse builds a result the way libcni does from a plugin's output.
func parse(t testing.TB, version, data string) types.Result {
	t.Helper()
	res, err := create.Create(version, []byte(data))
	if err != nil {
		t.Fatalf("create.Create(%q): %v", version, err)
	}
	return res
}

func TestFromResult(t *testing.T) {
	tests := []struct {
		name, version, result string
		want                  NetworkStatus
		wantGateways          []string
	}{{
		name:    "5.3.2.1 0.1.0 interface from CNI_IFNAME, 5.3.3.1 ips from ip4, 5.3.4.1 no mac",
		version: "0.1.0",
		result: `{"ip4": {"ip": "10.1.0.5/24", "gateway": "10.1.0.1",
			"routes": [{"dst": "0.0.0.0/0"}]}}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1", IPs: []string{"10.1.0.5/24"}},
		// The default route names no gateway: the plugin means ip4's.
		wantGateways: []string{"10.1.0.1"},
	}, {
		name:    "5.3.3.1 0.2.0 ips from ip4 and ip6, 5.3.6 dns",
		version: "0.2.0",
		result: `{"cniVersion": "0.2.0",
			"ip4": {"ip": "10.2.0.5/16", "gateway": "10.2.0.1", "routes": [{"dst": "0.0.0.0/0", "gw": "10.2.0.254"}]},
			"ip6": {"ip": "fd00:2::5/64", "gateway": "fd00:2::1"},
			"dns": {"nameservers": ["10.2.0.53"], "domain": "pod.example", "search": ["example"], "options": ["ndots:5"]}}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1", IPs: []string{"10.2.0.5/16", "fd00:2::5/64"},
			DNS: &DNS{Nameservers: []string{"10.2.0.53"}, Domain: "pod.example", Search: []string{"example"}}},
		wantGateways: []string{"10.2.0.254"},
	}, {
		name:    "5.3.2.1 0.3.0 first interface is a host-side veth, the sandbox one is used and the host's ips are left out",
		version: "0.3.0",
		result: `{"cniVersion": "0.3.0",
			"interfaces": [
				{"name": "veth1a2b3c", "mac": "ae:11:22:33:44:01"},
				{"name": "net1", "mac": "02:00:00:00:00:02", "sandbox": "/var/run/netns/pod"}],
			"ips": [
				{"version": "4", "address": "169.254.1.1/32", "interface": 0},
				{"version": "4", "address": "10.3.0.5/24", "gateway": "10.3.0.1", "interface": 1},
				{"version": "6", "address": "fd00:3::5/64", "gateway": "fd00:3::1", "interface": 1}]}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1", MAC: "02:00:00:00:00:02",
			IPs: []string{"10.3.0.5/24", "fd00:3::5/64"}},
		// No default route: the sandbox interface's gateways, not the host's.
		wantGateways: []string{"10.3.0.1", "fd00:3::1"},
	}, {
		name:    "5.3.3.1 rule 1 0.3.1 default routes of both families in result order",
		version: "0.3.1",
		result: `{"cniVersion": "0.3.1",
			"interfaces": [{"name": "eth1", "mac": "02:00:00:00:00:31", "sandbox": "/var/run/netns/pod"}],
			"ips": [
				{"version": "6", "address": "fd00:31::5/64", "gateway": "fd00:31::1", "interface": 0},
				{"version": "4", "address": "10.31.0.5/24", "gateway": "10.31.0.1", "interface": 0},
				{"version": "4", "address": "10.99.0.5/24", "interface": 3}],
			"routes": [
				{"dst": "10.0.0.0/8", "gw": "10.31.0.2"},
				{"dst": "::/0", "gw": "fd00:31::1"},
				{"dst": "0.0.0.0/0", "gw": "10.31.0.1"},
				{"dst": "0.0.0.0/0", "gw": "10.31.0.1"}]}`,
		want: NetworkStatus{Name: "ns/net", Interface: "eth1", MAC: "02:00:00:00:00:31",
			IPs: []string{"fd00:31::5/64", "10.31.0.5/24"}},
		wantGateways: []string{"fd00:31::1", "10.31.0.1"},
	}, {
		name:    "5.3.3.1 rule 2 0.4.0 no sandbox interface: ips without or with a negative interface index",
		version: "0.4.0",
		result: `{"cniVersion": "0.4.0",
			"interfaces": [{"name": "cni0", "mac": "02:00:00:00:00:40"}],
			"ips": [
				{"version": "4", "address": "10.40.0.1/24", "interface": 0},
				{"version": "4", "address": "10.40.0.5/24", "gateway": "10.40.0.1"},
				{"version": "6", "address": "fd00:40::5/64", "gateway": "fd00:40::1", "interface": -1}]}`,
		want:         NetworkStatus{Name: "ns/net", Interface: "net1", IPs: []string{"10.40.0.5/24", "fd00:40::5/64"}},
		wantGateways: []string{"10.40.0.1", "fd00:40::1"},
	}, {
		name:         "5.3.3.1 rule 2 1.0.0 IPAM-style result without interfaces",
		version:      "1.0.0",
		result:       `{"cniVersion": "1.0.0", "ips": [{"address": "10.100.0.5/24", "gateway": "10.100.0.1"}]}`,
		want:         NetworkStatus{Name: "ns/net", Interface: "net1", IPs: []string{"10.100.0.5/24"}},
		wantGateways: []string{"10.100.0.1"},
	}, {
		name:    "5.3.4 1.1.0 IP over InfiniBand keeps the 20-byte hardware address as reported",
		version: "1.1.0",
		result: `{"cniVersion": "1.1.0",
			"interfaces": [{"name": "ib0", "mac": "80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22",
				"sandbox": "/var/run/netns/pod", "pciID": "0000:41:00.2"}],
			"ips": [{"address": "198.51.100.1/24", "interface": 0}]}`,
		want: NetworkStatus{Name: "other-ns/ib", Interface: "ib0", IPs: []string{"198.51.100.1/24"},
			MAC: "80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22"},
	}, {
		name:    "5.3.4 1.0.0 hardware address kept in the plugin's letter case",
		version: "1.0.0",
		result: `{"cniVersion": "1.0.0",
			"interfaces": [{"name": "net1", "mac": "0A:BB:CC:DD:EE:FF", "sandbox": "/var/run/netns/pod"}]}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1", MAC: "0A:BB:CC:DD:EE:FF"},
	}, {
		name:    "5.3.3.1 1.0.0 sandbox interface without addresses has no ips even when the host has some",
		version: "1.0.0",
		result: `{"cniVersion": "1.0.0",
			"interfaces": [{"name": "net1", "sandbox": "/var/run/netns/pod"}, {"name": "vethhost"}],
			"ips": [{"address": "10.9.0.1/24", "gateway": "10.9.0.254", "interface": 1}, {"address": "10.9.1.1/24"}]}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1"},
	}, {
		name:    "5.3.6 dns with only options is left out",
		version: "1.0.0",
		result: `{"cniVersion": "1.0.0", "interfaces": [{"name": "net1", "sandbox": "/proc/1/ns/net"}],
			"dns": {"options": ["ndots:2"]}}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1"},
	}, {
		name:    "5.3.2 1.0.0 sandbox interface without a name is CNI_IFNAME",
		version: "1.0.0",
		result: `{"cniVersion": "1.0.0", "interfaces": [{"mac": "02:00:00:00:00:10", "sandbox": "/proc/1/ns/net"}],
			"ips": [{"address": "fd00:10::5/64", "interface": 0}], "routes": [{"dst": "::/0"}]}`,
		want: NetworkStatus{Name: "ns/net", Interface: "net1", MAC: "02:00:00:00:00:10", IPs: []string{"fd00:10::5/64"}},
		// A default route without a gateway and no address gateway: none.
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := parse(t, tt.version, tt.result)
			got, err := FromResult(tt.want.Name, res, "net1")
			if err != nil {
				t.Fatalf("FromResult: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromResult =\n%+v\nwant\n%+v", got, tt.want)
			}
			gws, err := Gateways(res, "net1")
			if err != nil {
				t.Fatalf("Gateways: %v", err)
			}
			if !reflect.DeepEqual(gws, tt.wantGateways) {
				t.Errorf("Gateways = %q, want %q", gws, tt.wantGateways)
			}
		})
	}
}

func TestSpec5_1_1_NoResultGivesMinimalMap(t *testing.T) {
	got, err := FromResult("ns/net", nil, "net1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (NetworkStatus{Name: "ns/net", Interface: "net1"}); !reflect.DeepEqual(got, want) {
		t.Errorf("FromResult(nil) = %+v, want %+v", got, want)
	}
	gws, err := Gateways(nil, "net1")
	if err != nil || gws != nil {
		t.Errorf("Gateways(nil) = %q, %v, want none", gws, err)
	}
}

// otherResult is a types.Result of no version libcni knows.
type otherResult struct{ types040.Result }

func TestFromResultRejectsMalformedResults(t *testing.T) {
	tests := []struct {
		name    string
		res     func(t *testing.T) types.Result
		wantErr string
	}{{
		name: "1.0.0 null interface",
		res: func(t *testing.T) types.Result {
			return parse(t, "1.0.0", `{"cniVersion":"1.0.0","interfaces":[null]}`)
		},
		wantErr: "interfaces[0] is null",
	}, {
		name: "0.4.0 null ip, on which libcni's converter would panic",
		res: func(t *testing.T) types.Result {
			return parse(t, "0.4.0", `{"cniVersion":"0.4.0","ips":[{"version":"4","address":"10.0.0.1/8"},null]}`)
		},
		wantErr: "ips[1] is null",
	}, {
		name:    "0.3.1 null route",
		res:     func(t *testing.T) types.Result { return parse(t, "0.3.1", `{"cniVersion":"0.3.1","routes":[null]}`) },
		wantErr: "routes[0] is null",
	}, {
		name: "1.1.0 ip without address",
		res: func(t *testing.T) types.Result {
			return parse(t, "1.1.0", `{"cniVersion":"1.1.0","ips":[{"gateway":"10.0.0.1"}]}`)
		},
		wantErr: "ips[0].address is missing",
	}, {
		name:    "0.4.0 type claiming 0.2.0, on which libcni's converter would panic",
		res:     func(*testing.T) types.Result { return &types040.Result{CNIVersion: "0.2.0"} },
		wantErr: `cniVersion "0.2.0"`,
	}, {
		name:    "a result type libcni does not have",
		res:     func(*testing.T) types.Result { return &otherResult{types040.Result{CNIVersion: "0.4.0"}} },
		wantErr: "unsupported CNI result type *status.otherResult",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := tt.res(t)
			if _, err := FromResult("ns/net", res, "net1"); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("FromResult error = %v, want one containing %q", err, tt.wantErr)
			}
			if _, err := Gateways(res, "net1"); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Gateways error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// versions are the result versions libcni creates.
var versions = []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

func FuzzFromResult(f *testing.F) {
	for _, seed := range []string{
		`{"ip4":{"ip":"10.1.0.5/24","gateway":"10.1.0.1","routes":[{"dst":"0.0.0.0/0"}]}}`,
		`{"cniVersion":"0.2.0","ip6":{"ip":"fd00::5/64"},"dns":{"nameservers":["::1"]}}`,
		`{"cniVersion":"0.3.0","interfaces":[{"name":"v"},{"name":"n","sandbox":"/x"}],"ips":[{"version":"4","address":"10.0.0.1/8","interface":1}]}`,
		`{"cniVersion":"0.3.1","ips":[{"version":"6","address":"fd00::1/64","interface":-1}],"routes":[{"dst":"::/0","gw":"fd00::2"}]}`,
		`{"cniVersion":"0.4.0","interfaces":[null],"ips":[null],"routes":[null]}`,
		`{"cniVersion":"1.0.0","interfaces":[{"name":"ib0","mac":"80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22","sandbox":"/x"}],"ips":[{"address":"198.51.100.1/24","interface":0}]}`,
		`{"cniVersion":"1.1.0","ips":[{"interface":7}],"routes":[{"dst":"0.0.0.0/0"}],"dns":{"domain":"d"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range versions {
			res, err := create.Create(v, data)
			if err != nil {
				continue
			}
			st, err := FromResult("ns/net", res, "net1")
			if _, gerr := Gateways(res, "net1"); (gerr == nil) != (err == nil) {
				t.Fatalf("%s: FromResult error %v but Gateways error %v", v, err, gerr)
			}
			if err != nil {
				continue
			}
			// Whatever a plugin reported, the map must make a valid annotation.
			value, err := Encode([]NetworkStatus{st})
			if err != nil {
				t.Fatalf("%s: Encode(%+v): %v", v, st, err)
			}
			if _, err := Decode(value); err != nil {
				t.Fatalf("%s: Decode(%s): %v", v, value, err)
			}
		}
	})
}

func BenchmarkFromResult(b *testing.B) {
	res := parse(b, "1.0.0", `{"cniVersion": "1.0.0",
		"interfaces": [{"name": "veth0a1b2c", "mac": "ae:00:00:00:00:01"},
			{"name": "net1", "mac": "02:00:00:00:00:02", "sandbox": "/var/run/netns/pod"}],
		"ips": [{"address": "10.3.0.5/24", "gateway": "10.3.0.1", "interface": 1},
			{"address": "fd00:3::5/64", "gateway": "fd00:3::1", "interface": 1}],
		"routes": [{"dst": "0.0.0.0/0", "gw": "10.3.0.1"}, {"dst": "::/0", "gw": "fd00:3::1"}],
		"dns": {"nameservers": ["10.3.0.53"], "search": ["svc.cluster.local"]}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromResult("ns/net", res, "net1"); err != nil {
			b.Fatal(err)
		}
	}
}
