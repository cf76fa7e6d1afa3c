package selection

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

const podNS = "my-namespace"

// wantErr is one expected *FieldError; reason is matched as a substring.
type wantErr struct {
	index   int
	network string
	key     string
	value   string
	reason  string
}

type parseCase struct {
	name  string
	value string
	want  []Selection
	errs  []wantErr
}

// fieldErrors unpacks Parse's joined error.
func fieldErrors(t *testing.T, err error) []*FieldError {
	t.Helper()
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	out := make([]*FieldError, 0, len(errs))
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) {
			t.Fatalf("error %v is not a *FieldError", e)
		}
		out = append(out, fe)
	}
	return out
}

func runParseCases(t *testing.T, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.value, podNS)
			if tc.errs == nil {
				if err != nil {
					t.Fatalf("Parse(%q): %v", tc.value, err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("Parse(%q)\n got %#v\nwant %#v", tc.value, got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse(%q) = %#v, want errors %+v", tc.value, got, tc.errs)
			}
			if got != nil {
				t.Errorf("Parse(%q) returned selections %#v with an error", tc.value, got)
			}
			checkFieldErrors(t, fieldErrors(t, err), tc.errs)
		})
	}
}

func checkFieldErrors(t *testing.T, got []*FieldError, want []wantErr) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(got), len(want), errors.Join(asErrors(got)...))
	}
	for i, w := range want {
		g := got[i]
		if g.Index != w.index || g.Network != w.network || g.Key != w.key || g.Value != w.value ||
			!strings.Contains(g.Reason, w.reason) {
			t.Errorf("error %d = %#v\nwant index %d network %q key %q value %q reason containing %q",
				i, g, w.index, w.network, w.key, w.value, w.reason)
		}
	}
}

func asErrors(fes []*FieldError) []error {
	out := make([]error, len(fes))
	for i, fe := range fes {
		out[i] = fe
	}
	return out
}

func sel(name string) Selection {
	return Selection{Name: name, Namespace: podNS}
}

func TestSpecExamples(t *testing.T) {
	netB := sel("net-b")
	netB.IPs = []string{"1.2.3.4"}
	netB.MAC = "aa:bb:cc:dd:ee:ff"
	ips := sel("net-b")
	ips.IPs = []string{"10.2.2.42/24", "2001:db8::5/64"}
	mac := sel("net-b")
	mac.MAC = "02:23:45:67:89:01"
	args := sel("net-b")
	args.CNIArgs = map[string]json.RawMessage{"spoofchk": json.RawMessage(`"on"`)}
	ports := sel("net-b")
	ports.PortMappings = []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "TCP"}}
	bw := sel("net-b")
	bw.Bandwidth = &Bandwidth{IngressRate: 2048, IngressBurst: 300, EgressRate: 8000, EgressBurst: 200}
	route := sel("net-b")
	route.DefaultRoute = []string{"10.0.0.1"}
	route.HasDefaultRoute = true

	runParseCases(t, []parseCase{
		{name: "4.1.1 comma-delimited example", value: "net-a,net-b,other-ns/net-c",
			want: []Selection{sel("net-a"), sel("net-b"), {Name: "net-c", Namespace: "other-ns"}}},
		{name: "4.1.2 JSON list example", value: `
      [
        {"name": "net-a"},
        {
          "name": "net-b",
          "ips": ["1.2.3.4"],
          "mac": "aa:bb:cc:dd:ee:ff"
        }
      ]
`, want: []Selection{sel("net-a"), netB}},
		{name: "4.1.2 JSON list example, other-namespace element", value: `[{"name": "net-c", "namespace": "other-ns"}]`,
			want: []Selection{{Name: "net-c", Namespace: "other-ns"}}},
		{name: "4.1.2.1.3.1 ips example", value: `
    [
      {
        "name": "net-b",
        "ips": ["10.2.2.42/24", "2001:db8::5/64"]
      }
    ]`, want: []Selection{ips}},
		{name: "4.1.2.1.4.1 mac example", value: `
    [
      {
        "name": "net-b",
        "mac": "02:23:45:67:89:01"
      }
    ]`, want: []Selection{mac}},
		{name: "4.1.2.1.6.1 cni-args example", value: `
[
  {
    "name": "net-b",
    "cni-args": {
      "spoofchk": "on"
    }
  }
]`, want: []Selection{args}},
		{name: "4.1.2.1.7.1 portMappings example", value: `
    [
      {
        "name": "net-b",
        "portMappings": [
          { "hostPort": 8080, "containerPort": 80, "protocol": "tcp" }
        ]
      }
    ]`, want: []Selection{ports}},
		{name: "4.1.2.1.8.1 bandwidth example without its comments", value: `
    [
      {
        "name": "net-b",
        "bandwidth": {
          "ingressRate": 2048,
          "ingressBurst": 300,
          "egressRate": 8000,
          "egressBurst": 200
        }
      }
    ]`, want: []Selection{bw}},
		{name: "4.1.2.1.9.1 default-route example", value: `
      [
        { "name": "net-a" },
        {
          "name": "net-b",
          "default-route": ["10.0.0.1"]
        }
      ]`, want: []Selection{sel("net-a"), route}},
		{name: "4.2.2 net-a,net-a attaches twice", value: "net-a,net-a",
			want: []Selection{sel("net-a"), sel("net-a")}},
	})
}

// The spec's own 4.1.2.1.8.1 example annotates the JSON with // comments.
func TestSpec4_1_2_1_8_1_CommentedExampleIsNotJSON(t *testing.T) {
	value := `
    [
      {
        "name": "net-b",
        "bandwidth": {
          "ingressRate": 2048, // Limit ingress to 2Kbps
          "ingressBurst": 300, // Allow small egress bursts of 300b
          "egressRate": 8000,  // Limit egress to 8000bps
          "egressBurst": 200   // Allow small egress bursts of 200b
        }
      }
    ]
`
	_, err := Parse(value, podNS)
	want := "networks annotation: not valid JSON at line 6 column 32: " +
		"invalid character '/' looking for beginning of object key string (JSON has no comments)"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse error = %v\nwant %s", err, want)
	}
}

func TestErrorMessageNamesElementKeyAndValue(t *testing.T) {
	_, err := Parse(`[{"name":"net-a"},{"name":"sriov-a","mac":"zz:11"}]`, podNS)
	want := `networks annotation element 1 ("sriov-a"): "mac" "zz:11": not a 6-byte Ethernet or 20-byte InfiniBand hardware address`
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant %s", err, want)
	}
}

func TestSpec4_1_Formats(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "4.1 empty value selects nothing", value: "", want: nil},
		{name: "4.1 blank value selects nothing", value: " \n\t ", want: nil},
		{name: "4.1.2 empty JSON list selects nothing", value: " [ ] ", want: nil},
		{name: "4.1.1 whitespace around elements trimmed", value: " net-a , other-ns/net-c\n",
			want: []Selection{sel("net-a"), {Name: "net-c", Namespace: "other-ns"}}},
		{name: "4.1.1 single name", value: "net-a", want: []Selection{sel("net-a")}},
		{name: "4.1.1 extension name@ifname", value: "net-a@net1,other-ns/net-c@net2",
			want: []Selection{{Name: "net-a", Namespace: podNS, Interface: "net1"},
				{Name: "net-c", Namespace: "other-ns", Interface: "net2"}}},
		{name: "4.1.1 empty element refused", value: "net-a,,net-b",
			errs: []wantErr{{index: 1, key: "name", value: `""`, reason: "empty"}}},
		{name: "4.1.1 trailing comma refused", value: "net-a,",
			errs: []wantErr{{index: 1, key: "name", value: `""`, reason: "empty"}}},
		{name: "4.1.1 empty namespace before slash refused", value: "/net-a",
			errs: []wantErr{{index: 0, network: "net-a", key: "namespace", value: `""`, reason: "empty"}}},
		{name: "4.1.1 two slashes refused", value: "a/b/c",
			errs: []wantErr{{index: 0, key: "name", value: `"b/c"`, reason: `'/' at offset 1`}}},
		{name: "4.1.1 upper-case namespace refused", value: "Other/net-c",
			errs: []wantErr{{index: 0, network: "net-c", key: "namespace", value: `"Other"`, reason: "'O' at offset 0"}}},
		{name: "4.1.1 extension @ifname validated like interface", value: "net-a@a/b",
			errs: []wantErr{{index: 0, network: "net-a", key: "interface", value: `"a/b"`, reason: "'/' at offset 1"}}},
		{name: "4.1.1 extension empty @ifname refused", value: "net-a@",
			errs: []wantErr{{index: 0, network: "net-a", key: "interface", value: `""`, reason: "empty"}}},
		{name: "4.1.2 single JSON object refused", value: ` {"name":"net-a"}`,
			errs: []wantErr{{index: -1, reason: "a JSON list is required"}}},
		{name: "4.1.2 trailing text after list refused", value: `[{"name":"net-a"}] x`,
			errs: []wantErr{{index: -1, reason: "line 1 column 20: invalid character 'x' after top-level value"}}},
		{name: "4.1.2 single quotes refused with hint", value: `[{'name':'net-a'}]`,
			errs: []wantErr{{index: -1, reason: "(JSON strings take double quotes)"}}},
		{name: "4.1.2 unterminated list refused", value: `[{"name":"net-a"}`,
			errs: []wantErr{{index: -1, reason: "unexpected end of JSON input"}}},
		{name: "4.1.2 element not an object", value: `[{"name":"net-a"}, "net-b", 5, null, []]`,
			errs: []wantErr{
				{index: 1, value: `"net-b"`, reason: `want a JSON object such as {"name": "net-a"}, found a JSON string`},
				{index: 2, value: `5`, reason: "found a JSON number"},
				{index: 3, value: `null`, reason: "found a JSON null"},
				{index: 4, value: `[]`, reason: "found a JSON array"},
			}},
		{name: "4.2 same network twice in JSON", value: `[{"name":"net-a"},{"name":"net-a"}]`,
			want: []Selection{sel("net-a"), sel("net-a")}},
	})
}

func TestSpec4_1_2_1_KeyRules(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "4.1.2.1 keys with a period are extensions and ignored",
			value: `[{"name":"net-a","org.example.color":"blue","ips.v2":5}]`, want: []Selection{sel("net-a")}},
		{name: "4.1.2.1 unknown reserved key ip suggests ips", value: `[{"name":"net-a","ip":["10.0.0.1"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ip", value: `["10.0.0.1"]`, reason: `unknown key (did you mean "ips"?)`}}},
		{name: "4.1.2.1 unknown reserved key macaddress suggests mac", value: `[{"name":"net-a","macaddress":"02:00:00:00:00:01"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "macaddress", value: `"02:00:00:00:00:01"`, reason: `(did you mean "mac"?)`}}},
		{name: "4.1.2.1 unknown reserved key ifname suggests interface", value: `[{"name":"net-a","ifname":"net1"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ifname", value: `"net1"`, reason: `(did you mean "interface"?)`}}},
		{name: "4.1.2.1 keys are case-sensitive: Interface suggests interface", value: `[{"name":"net-a","Interface":"net1"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "Interface", value: `"net1"`, reason: `(did you mean "interface"?)`}}},
		{name: "4.1.2.1 misspelt bandwith suggests bandwidth", value: `[{"name":"net-a","bandwith":{}}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "bandwith", value: `{}`, reason: `(did you mean "bandwidth"?)`}}},
		{name: "4.1.2.1 camel-case defaultRoute suggests default-route", value: `[{"name":"net-a","defaultRoute":[]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "defaultRoute", value: `[]`, reason: `(did you mean "default-route"?)`}}},
		{name: "4.1.2.1 unknown key with nothing close", value: `[{"name":"net-a","colour":"blue"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "colour", value: `"blue"`, reason: `unknown key; keys without a period are reserved`}}},
		{name: "4.1.2.1 OVN-Kubernetes ipam-claim-reference explained", value: `[{"name":"net-a","ipam-claim-reference":"claim"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ipam-claim-reference", value: `"claim"`, reason: "OVN-Kubernetes"}}},
		{name: "4.1.2.1 key given twice refused", value: `[{"name":"net-a","mac":"02:00:00:00:00:01","mac":"02:00:00:00:00:02"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `"02:00:00:00:00:02"`, reason: "more than once"}}},
		{name: "4.1.2.1 all problems of all elements reported in order",
			value: `[{"name":"Net-A","mac":"x"},{"name":"net-b","interface":""},{"ips":"10.0.0.1"}]`,
			errs: []wantErr{
				{index: 0, key: "name", value: `"Net-A"`, reason: "'N' at offset 0"},
				{index: 0, key: "mac", value: `"x"`, reason: "not a 6-byte"},
				{index: 1, network: "net-b", key: "interface", value: `""`, reason: "empty"},
				{index: 2, key: "ips", value: `"10.0.0.1"`, reason: "want an array of strings, found a JSON string"},
				{index: 2, key: "name", reason: "required key is missing"},
			}},
	})
}

func TestSpec4_1_2_1_1_Name(t *testing.T) {
	long := strings.Repeat("a", 63)
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.1 63-character name accepted", value: `[{"name":"` + long + `"}]`, want: []Selection{sel(long)}},
		{name: "4.1.2.1.1 digits and inner dashes accepted", value: `[{"name":"0-net-9"}]`, want: []Selection{sel("0-net-9")}},
		{name: "4.1.2.1.1 name missing", value: `[{"namespace":"other-ns"}]`,
			errs: []wantErr{{index: 0, key: "name", reason: "required key is missing"}}},
		{name: "4.1.2.1.1 empty name", value: `[{"name":""}]`,
			errs: []wantErr{{index: 0, key: "name", value: `""`, reason: "empty"}}},
		{name: "3.3 64-character name refused", value: `[{"name":"` + long + `a"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"` + long + `…`, reason: "64 characters"}}},
		{name: "3.3 upper case refused", value: `[{"name":"Net-a"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"Net-a"`, reason: "'N' at offset 0"}}},
		{name: "3.3 leading dash refused", value: `[{"name":"-net"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"-net"`, reason: "start and end"}}},
		{name: "3.3 trailing dash refused", value: `[{"name":"net-"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"net-"`, reason: "start and end"}}},
		{name: "3.3 dot refused", value: `[{"name":"net.a"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"net.a"`, reason: "'.' at offset 3"}}},
		{name: "4.1.2.1.1 namespace/name in name points at namespace key", value: `[{"name":"other-ns/net-a"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"other-ns/net-a"`, reason: `put the namespace in "namespace"`}}},
		{name: "4.1.2.1.1 name@if in name points at interface key", value: `[{"name":"net-a@net1"}]`,
			errs: []wantErr{{index: 0, key: "name", value: `"net-a@net1"`, reason: `put the interface name in "interface"`}}},
		{name: "4.1.2.1.1 name of wrong JSON type", value: `[{"name":42}]`,
			errs: []wantErr{{index: 0, key: "name", value: `42`, reason: "want a string, found a JSON number"}}},
	})
}

func TestSpec4_1_2_1_2_Namespace(t *testing.T) {
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.2 namespace given", value: `[{"name":"net-a","namespace":"other-ns"}]`,
			want: []Selection{{Name: "net-a", Namespace: "other-ns"}}},
		{name: "4.1.2.1.2 empty namespace is the pod's", value: `[{"name":"net-a","namespace":""}]`,
			want: []Selection{sel("net-a")}},
		{name: "4.1.2.1.2 invalid namespace", value: `[{"name":"net-a","namespace":"Other_NS"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "namespace", value: `"Other_NS"`, reason: "'O' at offset 0"}}},
		{name: "4.1.2.1.2 namespace of wrong JSON type", value: `[{"name":"net-a","namespace":null}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "namespace", value: `null`, reason: "want a string, found a JSON null"}}},
	})
}

func TestSpec4_1_2_1_3_IPs(t *testing.T) {
	one := func(ips ...string) []Selection {
		s := sel("net-a")
		s.IPs = ips
		return []Selection{s}
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.3 IPv4 without prefix", value: `[{"name":"net-a","ips":["10.0.0.5"]}]`, want: one("10.0.0.5")},
		{name: "4.1.2.1.3 IPv6 with prefix kept as given", value: `[{"name":"net-a","ips":["2001:DB8::5/64"]}]`, want: one("2001:DB8::5/64")},
		{name: "4.1.2.1.3 IPv4 /32 and /0", value: `[{"name":"net-a","ips":["10.0.0.5/32","10.0.0.6/0"]}]`, want: one("10.0.0.5/32", "10.0.0.6/0")},
		{name: "4.1.2.1.3 empty list refused", value: `[{"name":"net-a","ips":[]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips", value: `[]`, reason: "at least one"}}},
		{name: "4.1.2.1.3 not an address", value: `[{"name":"net-a","ips":["10.0.0.5","10.0.0.256"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[1]", value: `"10.0.0.256"`, reason: "not an IPv4 or IPv6 address"}}},
		{name: "4.1.2.1.3 IPv4 prefix too long", value: `[{"name":"net-a","ips":["10.0.0.5/33"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[0]", value: `"10.0.0.5/33"`, reason: `prefix length "33" is not a number from 0 to 32`}}},
		{name: "4.1.2.1.3 IPv6 prefix too long", value: `[{"name":"net-a","ips":["2001:db8::5/129"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[0]", value: `"2001:db8::5/129"`, reason: "0 to 128"}}},
		{name: "4.1.2.1.3 empty prefix", value: `[{"name":"net-a","ips":["10.0.0.5/"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[0]", value: `"10.0.0.5/"`, reason: `prefix length ""`}}},
		{name: "4.1.2.1.3 leading-zero octet refused", value: `[{"name":"net-a","ips":["10.0.0.05"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[0]", value: `"10.0.0.05"`, reason: "not an IPv4 or IPv6 address"}}},
		{name: "4.1.2.1.3 IPv6 zone refused", value: `[{"name":"net-a","ips":["fe80::1%eth0"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[0]", value: `"fe80::1%eth0"`, reason: "zone"}}},
		{name: "4.1.2.1.3 repeated address refused", value: `[{"name":"net-a","ips":["10.0.0.5/24","10.0.0.5"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[1]", value: `"10.0.0.5"`, reason: "repeats the address of ips[0]"}}},
		{name: "4.1.2.1.3 element of wrong JSON type", value: `[{"name":"net-a","ips":[167772165]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips[0]", value: `167772165`, reason: "want a string, found a JSON number"}}},
		{name: "4.1.2.1.3 string instead of list", value: `[{"name":"net-a","ips":"10.0.0.5"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "ips", value: `"10.0.0.5"`, reason: "want an array of strings, found a JSON string"}}},
	})
}

func TestSpec4_1_2_1_4_MAC(t *testing.T) {
	ipoib := "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"
	one := func(mac string) []Selection {
		s := sel("net-a")
		s.MAC = mac
		return []Selection{s}
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.4 mac 6-byte Ethernet accepted", value: `[{"name":"net-a","mac":"02:23:45:67:89:01"}]`, want: one("02:23:45:67:89:01")},
		{name: "4.1.2.1.4 mac upper case normalised", value: `[{"name":"net-a","mac":"02:AB:CD:EF:00:01"}]`, want: one("02:ab:cd:ef:00:01")},
		{name: "4.1.2.1.4 mac dash form normalised", value: `[{"name":"net-a","mac":"02-ab-cd-ef-00-01"}]`, want: one("02:ab:cd:ef:00:01")},
		{name: "4.1.2.1.4 mac 20-byte IPoIB accepted", value: `[{"name":"net-a","mac":"` + strings.ToUpper(ipoib) + `"}]`, want: one(ipoib)},
		{name: "4.1.2.1.4 mac 8-byte EUI-64 refused", value: `[{"name":"net-a","mac":"02:23:45:67:89:01:02:03"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `"02:23:45:67:89:01:02:03"`, reason: "not a 6-byte Ethernet or 20-byte InfiniBand"}}},
		{name: "4.1.2.1.4 mac garbage refused", value: `[{"name":"net-a","mac":"zz:11"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `"zz:11"`, reason: "not a 6-byte Ethernet or 20-byte InfiniBand"}}},
		{name: "4.1.2.1.4 mac multicast refused", value: `[{"name":"net-a","mac":"01:00:5e:00:00:01"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `"01:00:5e:00:00:01"`, reason: "multicast"}}},
		{name: "4.1.2.1.4 mac all zeros refused", value: `[{"name":"net-a","mac":"00:00:00:00:00:00"}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `"00:00:00:00:00:00"`, reason: "all-zero"}}},
		{name: "4.1.2.1.4 mac empty refused", value: `[{"name":"net-a","mac":""}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `""`, reason: "not a 6-byte"}}},
		{name: "4.1.2.1.4 mac of wrong JSON type", value: `[{"name":"net-a","mac":[2,35]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "mac", value: `[2,35]`, reason: "want a string, found a JSON array"}}},
	})
}

func TestInfinibandGUID(t *testing.T) {
	one := func(guid string) []Selection {
		s := sel("ib-a")
		s.InfinibandGUID = guid
		return []Selection{s}
	}
	runParseCases(t, []parseCase{
		{name: "v1.2 infiniband-guid accepted", value: `[{"name":"ib-a","infiniband-guid":"c2:8f:0a:ff:fe:00:00:01"}]`, want: one("c2:8f:0a:ff:fe:00:00:01")},
		{name: "v1.2 infiniband-guid upper case normalised", value: `[{"name":"ib-a","infiniband-guid":"C2:8F:0A:FF:FE:00:00:01"}]`, want: one("c2:8f:0a:ff:fe:00:00:01")},
		{name: "v1.2 infiniband-guid 6 bytes refused", value: `[{"name":"ib-a","infiniband-guid":"c2:8f:0a:ff:fe:00"}]`,
			errs: []wantErr{{index: 0, network: "ib-a", key: "infiniband-guid", value: `"c2:8f:0a:ff:fe:00"`, reason: "not an 8-byte InfiniBand GUID"}}},
		{name: "v1.2 infiniband-guid of wrong JSON type", value: `[{"name":"ib-a","infiniband-guid":1}]`,
			errs: []wantErr{{index: 0, network: "ib-a", key: "infiniband-guid", value: `1`, reason: "want a string, found a JSON number"}}},
		{name: "v1.2 infinibandGUID suggests infiniband-guid", value: `[{"name":"ib-a","infinibandGUID":"c2:8f:0a:ff:fe:00:00:01"}]`,
			errs: []wantErr{{index: 0, network: "ib-a", key: "infinibandGUID", value: `"c2:8f:0a:ff:fe:00:00:01"`, reason: `(did you mean "infiniband-guid"?)`}}},
	})
}

func TestSpec4_1_2_1_5_Interface(t *testing.T) {
	one := func(ifname string) []Selection {
		s := sel("net-a")
		s.Interface = ifname
		return []Selection{s}
	}
	iface := func(name, value, reason string) parseCase {
		return parseCase{name: name, value: `[{"name":"net-a","interface":` + value + `}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "interface", value: value, reason: reason}}}
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.5 interface accepted", value: `[{"name":"net-a","interface":"net1"}]`, want: one("net1")},
		{name: "4.1.2.1.5 15-byte interface accepted", value: `[{"name":"net-a","interface":"abcdefghijklmno"}]`, want: one("abcdefghijklmno")},
		{name: "4.1.2.1.5 non-ASCII UTF-8 the kernel accepts", value: `[{"name":"net-a","interface":"né"}]`, want: one("né")},
		iface("4.1.2.1.5 16-byte interface refused", `"abcdefghijklmnop"`, "16 bytes"),
		iface("4.1.2.1.5 empty interface refused", `""`, "empty"),
		iface("4.1.2.1.5 dot refused", `"."`, "not a valid Linux interface name"),
		iface("4.1.2.1.5 dot-dot refused", `".."`, "not a valid Linux interface name"),
		iface("4.1.2.1.5 slash refused", `"net/1"`, "'/' at offset 3"),
		iface("4.1.2.1.5 colon refused", `"net:1"`, "':' at offset 3"),
		iface("4.1.2.1.5 space refused", `"net 1"`, "whitespace byte 0x20 at offset 3"),
		iface("4.1.2.1.5 tab refused", `"net\t1"`, "whitespace byte 0x09"),
		iface("4.1.2.1.5 NUL refused", `"net\u00001"`, "NUL at offset 3"),
		iface("4.1.2.1.5 kernel-space byte 0xa0 refused", `"à"`, "whitespace byte 0xa0 at offset 1"),
		iface("4.1.2.1.5 template percent refused", `"net%d"`, "template"),
		iface("4.1.2.1.5 wrong JSON type", `7`, "want a string, found a JSON number"),
		{name: "4.1.2.1.5 duplicate interface refused", value: `[{"name":"net-a","interface":"net1"},{"name":"net-b","interface":"net1"}]`,
			errs: []wantErr{{index: 1, network: "net-b", key: "interface", value: `"net1"`, reason: "element 0 already asks for this interface name"}}},
		{name: "4.1.2.1.5 duplicate interface across comma extension", value: `net-a@net1,net-b@net1`,
			errs: []wantErr{{index: 1, network: "net-b", key: "interface", value: `"net1"`, reason: "element 0 already asks"}}},
		{name: "4.1.2.1.5 interface names are case-sensitive", value: `[{"name":"net-a","interface":"net1"},{"name":"net-b","interface":"NET1"}]`,
			want: []Selection{{Name: "net-a", Namespace: podNS, Interface: "net1"}, {Name: "net-b", Namespace: podNS, Interface: "NET1"}}},
	})
}

func TestSpec4_1_2_1_6_CNIArgs(t *testing.T) {
	one := func(args map[string]json.RawMessage) []Selection {
		s := sel("net-a")
		s.CNIArgs = args
		return []Selection{s}
	}
	device := func(key string) parseCase {
		return parseCase{name: "4.1.2.1.6 device key " + key + " refused", value: `[{"name":"net-a","cni-args":{"vlan":5,"` + key + `":"0000:3b:02.0"}}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "cni-args." + key, value: `"0000:3b:02.0"`, reason: "may not name one"}}}
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.6 nested values kept as JSON", value: `[{"name":"net-a","cni-args":{"vlan":5,"trust":"on","list":[1, 2],"obj":{"a":null}}}]`,
			want: one(map[string]json.RawMessage{"vlan": json.RawMessage(`5`), "trust": json.RawMessage(`"on"`),
				"list": json.RawMessage(`[1, 2]`), "obj": json.RawMessage(`{"a":null}`)})},
		{name: "4.1.2.1.6 empty object accepted", value: `[{"name":"net-a","cni-args":{}}]`, want: one(map[string]json.RawMessage{})},
		device("deviceID"),
		device("pciBusID"),
		device("CNIDeviceInfoFile"),
		device("DEVICEID"),
		device("pcibusid"),
		{name: "4.1.2.1.6 cni-args must be an object", value: `[{"name":"net-a","cni-args":["spoofchk=on"]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "cni-args", value: `["spoofchk=on"]`, reason: "want an object, found a JSON array"}}},
		{name: "4.1.2.1.6 repeated cni-args key refused", value: `[{"name":"net-a","cni-args":{"vlan":5,"vlan":6}}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "cni-args.vlan", value: `6`, reason: "more than once"}}},
	})
}

func TestSpec4_1_2_1_7_PortMappings(t *testing.T) {
	one := func(pms ...PortMapping) []Selection {
		s := sel("net-a")
		s.PortMappings = pms
		return []Selection{s}
	}
	pm := func(name, mapping, key, value, reason string) parseCase {
		return parseCase{name: name, value: `[{"name":"net-a","portMappings":[` + mapping + `]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: key, value: value, reason: reason}}}
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.7 protocol defaults to TCP", value: `[{"name":"net-a","portMappings":[{"hostPort":1,"containerPort":65535}]}]`,
			want: one(PortMapping{HostPort: 1, ContainerPort: 65535, Protocol: "TCP"})},
		{name: "4.1.2.1.7 protocol case-insensitive", value: `[{"name":"net-a","portMappings":[{"hostPort":53,"containerPort":53,"protocol":"Udp"},{"hostPort":99,"containerPort":9,"protocol":"sctp"}]}]`,
			want: one(PortMapping{HostPort: 53, ContainerPort: 53, Protocol: "UDP"}, PortMapping{HostPort: 99, ContainerPort: 9, Protocol: "SCTP"})},
		{name: "4.1.2.1.7 CONVENTIONS hostIP accepted", value: `[{"name":"net-a","portMappings":[{"hostPort":80,"containerPort":8080,"hostIP":"192.0.2.1"}]}]`,
			want: one(PortMapping{HostPort: 80, ContainerPort: 8080, Protocol: "TCP", HostIP: "192.0.2.1"})},
		{name: "4.1.2.1.7 empty list refused", value: `[{"name":"net-a","portMappings":[]}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "portMappings", value: `[]`, reason: "at least one mapping"}}},
		{name: "4.1.2.1.7 object instead of list", value: `[{"name":"net-a","portMappings":{"hostPort":1,"containerPort":1}}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: "portMappings", value: `{"hostPort":1,"containerPort":1}`, reason: "want an array of objects, found a JSON object"}}},
		pm("4.1.2.1.7 mapping not an object", `8080`, "portMappings[0]", `8080`, "want an object, found a JSON number"),
		pm("4.1.2.1.7 hostPort missing", `{"containerPort":80}`, "portMappings[0].hostPort", "", "required key is missing"),
		pm("4.1.2.1.7 containerPort missing", `{"hostPort":80}`, "portMappings[0].containerPort", "", "required key is missing"),
		pm("4.1.2.1.7 hostPort zero", `{"hostPort":0,"containerPort":80}`, "portMappings[0].hostPort", `0`, "want an integer from 1 to 65535"),
		pm("4.1.2.1.7 containerPort 65536", `{"hostPort":80,"containerPort":65536}`, "portMappings[0].containerPort", `65536`, "from 1 to 65535"),
		pm("4.1.2.1.7 negative port", `{"hostPort":-80,"containerPort":80}`, "portMappings[0].hostPort", `-80`, "from 1 to 65535"),
		pm("4.1.2.1.7 huge port", `{"hostPort":99999999999999999999,"containerPort":80}`, "portMappings[0].hostPort", `99999999999999999999`, "from 1 to 65535"),
		pm("4.1.2.1.7 fractional port", `{"hostPort":80.5,"containerPort":80}`, "portMappings[0].hostPort", `80.5`, "fraction or exponent"),
		pm("4.1.2.1.7 port as string", `{"hostPort":"80","containerPort":80}`, "portMappings[0].hostPort", `"80"`, "want an integer, found a JSON string"),
		pm("4.1.2.1.7 unknown protocol", `{"hostPort":80,"containerPort":80,"protocol":"icmp"}`, "portMappings[0].protocol", `"icmp"`, "want TCP, UDP or SCTP"),
		pm("4.1.2.1.7 protocol wrong JSON type", `{"hostPort":80,"containerPort":80,"protocol":6}`, "portMappings[0].protocol", `6`, "want a string, found a JSON number"),
		pm("4.1.2.1.7 bad hostIP", `{"hostPort":80,"containerPort":80,"hostIP":"192.0.2.0/24"}`, "portMappings[0].hostIP", `"192.0.2.0/24"`, "not an IPv4 or IPv6 address"),
		pm("4.1.2.1.7 misspelt key suggests", `{"hostport":80,"hostPort":80,"containerPort":80}`, "portMappings[0].hostport", `80`, `unknown key (did you mean "hostPort"?)`),
		pm("4.1.2.1.7 repeated key refused", `{"hostPort":80,"hostPort":81,"containerPort":80}`, "portMappings[0].hostPort", `81`, "more than once"),
	})
}

func TestSpec4_1_2_1_8_Bandwidth(t *testing.T) {
	one := func(bw Bandwidth) []Selection {
		s := sel("net-a")
		s.Bandwidth = &bw
		return []Selection{s}
	}
	bad := func(name, body, key, value, reason string) parseCase {
		return parseCase{name: name, value: `[{"name":"net-a","bandwidth":` + body + `}]`,
			errs: []wantErr{{index: 0, network: "net-a", key: key, value: value, reason: reason}}}
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.8 ingress rate alone accepted", value: `[{"name":"net-a","bandwidth":{"ingressRate":1000000}}]`,
			want: one(Bandwidth{IngressRate: 1000000})},
		{name: "4.1.2.1.8 egress rate and burst accepted", value: `[{"name":"net-a","bandwidth":{"egressRate":9223372036854775807,"egressBurst":1}}]`,
			want: one(Bandwidth{EgressRate: 9223372036854775807, EgressBurst: 1})},
		bad("4.1.2.1.8 empty object refused", `{}`, "bandwidth", `{}`, "at least one of ingressRate, ingressBurst, egressRate, egressBurst"),
		bad("4.1.2.1.8 zero rate refused", `{"ingressRate":0}`, "bandwidth.ingressRate", `0`, "want an integer of at least 1"),
		bad("4.1.2.1.8 negative burst refused", `{"egressRate":5,"egressBurst":-1}`, "bandwidth.egressBurst", `-1`, "at least 1"),
		bad("4.1.2.1.8 rate beyond int64 refused", `{"egressRate":9223372036854775808}`, "bandwidth.egressRate", `9223372036854775808`, "at least 1"),
		bad("4.1.2.1.8 exponent refused", `{"egressRate":1e9}`, "bandwidth.egressRate", `1e9`, "fraction or exponent"),
		bad("4.1.2.1.8 ingressBurst without ingressRate", `{"ingressBurst":300,"egressRate":8000}`, "bandwidth.ingressBurst", `300`, `needs "ingressRate"`),
		bad("4.1.2.1.8 egressBurst without egressRate", `{"egressBurst":200}`, "bandwidth.egressBurst", `200`, `needs "egressRate"`),
		bad("4.1.2.1.8 string rate", `{"ingressRate":"2Mbps"}`, "bandwidth.ingressRate", `"2Mbps"`, "want an integer, found a JSON string"),
		bad("4.1.2.1.8 list instead of object", `[{"ingressRate":1}]`, "bandwidth", `[{"ingressRate":1}]`, "want an object, found a JSON array"),
		bad("4.1.2.1.8 misspelt key suggests", `{"ingressrate":1,"egressRate":1}`, "bandwidth.ingressrate", `1`, `(did you mean "ingressRate"?)`),
	})
}

func TestSpec4_1_2_1_9_DefaultRoute(t *testing.T) {
	withRoute := func(gateways ...string) Selection {
		s := sel("net-b")
		s.DefaultRoute = gateways
		s.HasDefaultRoute = true
		return s
	}
	runParseCases(t, []parseCase{
		{name: "4.1.2.1.9 empty list still selects the attachment", value: `[{"name":"net-a"},{"name":"net-b","default-route":[]}]`,
			want: []Selection{sel("net-a"), withRoute()}},
		{name: "4.1.2.1.9 several gateways in order", value: `[{"name":"net-b","default-route":["10.0.0.1","2001:db8::1"]}]`,
			want: []Selection{withRoute("10.0.0.1", "2001:db8::1")}},
		{name: "4.1.2.1.9 on two elements refused", value: `[{"name":"net-a","default-route":["10.0.0.1"]},{"name":"net-b","default-route":["10.1.0.1"]}]`,
			errs: []wantErr{{index: 1, network: "net-b", key: "default-route", value: `["10.1.0.1"]`, reason: "element 0 already carries it"}}},
		{name: "4.1.2.1.9 gateway with prefix refused", value: `[{"name":"net-b","default-route":["10.0.0.1/24"]}]`,
			errs: []wantErr{{index: 0, network: "net-b", key: "default-route[0]", value: `"10.0.0.1/24"`, reason: "not an IPv4 or IPv6 address"}}},
		{name: "4.1.2.1.9 gateway not a string", value: `[{"name":"net-b","default-route":[true]}]`,
			errs: []wantErr{{index: 0, network: "net-b", key: "default-route[0]", value: `true`, reason: "want a string, found a JSON boolean"}}},
		{name: "4.1.2.1.9 string instead of list", value: `[{"name":"net-b","default-route":"10.0.0.1"}]`,
			errs: []wantErr{{index: 0, network: "net-b", key: "default-route", value: `"10.0.0.1"`, reason: "want an array of strings, found a JSON string"}}},
	})
}

func TestParseRefusesInvalidPodNamespace(t *testing.T) {
	if _, err := Parse("net-a", "Bad_NS"); err == nil || !strings.Contains(err.Error(), `pod namespace "Bad_NS"`) {
		t.Fatalf("Parse with pod namespace Bad_NS: error %v, want one naming the pod namespace", err)
	}
	if got, err := Parse("", "Bad_NS"); got != nil || err != nil {
		t.Fatalf("Parse of empty value = %v, %v; want nothing", got, err)
	}
}

func TestKnownKeysAreAllHandled(t *testing.T) {
	for _, key := range knownKeys() {
		_, err := Parse(`[{"name":"net-a",`+jsonQuote(key)+`:0}]`, podNS)
		if err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("known key %q treated as unknown: %v", key, err)
		}
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestFieldErrorShortensLongValues(t *testing.T) {
	long := strings.Repeat("é", 100)
	_, err := Parse(`[{"name":"`+long+`"}]`, podNS)
	fe := fieldErrors(t, err)[0]
	if len(fe.Value) > maxShownValue+len("…") || !strings.HasSuffix(fe.Value, "…") || !strings.HasPrefix(fe.Value, `"éé`) {
		t.Fatalf("Value = %q, want a short prefix ending in …", fe.Value)
	}
}

func TestFieldErrorValueIsOneLine(t *testing.T) {
	_, err := Parse("[{\"name\":\"net-a\",\"mac\": [\n\t2,\r\n 35\n]}]", podNS)
	fe := fieldErrors(t, err)[0]
	if fe.Value != "[2,35]" || strings.ContainsAny(fe.Error(), "\r\n\t") {
		t.Fatalf("Value = %q, error %q; want the value compacted onto one line", fe.Value, fe.Error())
	}
}
