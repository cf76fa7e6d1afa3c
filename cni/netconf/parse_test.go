package netconf

import (
	"encoding/json"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

// The NPWG v1.1 examples, with the spec.config strings exactly as printed.
const (
	spec3_2_1 = `{
    "cniVersion": "0.3.0",
    "name": "a-bridge-network",
    "type": "bridge",
    "bridge": "br0",
    "isGateway": true,
    "ipam": {
      "type": "host-local",
      "subnet": "192.168.5.0/24",
      "dataDir": "/mnt/cluster-ipam"
    }
  }`
	spec3_2_2 = `{
    "cniVersion": "0.3.0",
    "name": "another-bridge-network",
    "plugins": [
      {
        "type": "bridge",
        "bridge": "br0",
        "ipam": {
          "type": "host-local",
          "subnet": "192.168.5.0/24"
        }
      },
      {
        "type": "port-forwarding"
      },
      {
        "type": "tuning",
        "sysctl": {
          "net.ipv4.conf.all.log_martians": "1"
        }
      }
    ]
  }`
	spec3_2_3 = `{  
    "cniVersion": "0.3.0",  
    "type": "awesome-plugin"  
  }`
	spec3_4_2_1 = `{
    "cniVersion": "0.3.0",
    "type": "awesome-plugin"
} `
	spec3_4_2_1Sent = `{
  "cniVersion": "0.3.0",
  "name": "a-bridge-network",
  "type": "awesome-plugin"
}`
)

// assertJSONEqual compares two JSON documents by value.
func assertJSONEqual(t *testing.T, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("got invalid JSON %s: %v", got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("want invalid JSON %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("JSON differs\ngot:  %s\nwant: %s", got, want)
	}
}

func mustParse(t testing.TB, config, nadName string) *Delegate {
	t.Helper()
	d, err := Parse([]byte(config), nadName, "test "+nadName)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return d
}

func TestSpec3_2_Examples(t *testing.T) {
	tests := []struct {
		name, nadName, config string
		wantName              string
		wantPlugins           []string // each plugin's JSON as given
	}{
		{
			name: "3.2.1 CNI config JSON in object", nadName: "a-bridge-network", config: spec3_2_1,
			wantName:    "a-bridge-network",
			wantPlugins: []string{spec3_2_1},
		},
		{
			name: "3.2.2 CNI configlist JSON in object", nadName: "another-bridge-network", config: spec3_2_2,
			wantName: "another-bridge-network",
			wantPlugins: []string{
				`{"type":"bridge","bridge":"br0","ipam":{"type":"host-local","subnet":"192.168.5.0/24"}}`,
				`{"type":"port-forwarding"}`,
				`{"type":"tuning","sysctl":{"net.ipv4.conf.all.log_martians":"1"}}`,
			},
		},
		{
			name: "3.2.3 limited CNI config (thick plugin)", nadName: "a-bridge-network", config: spec3_2_3,
			wantName:    "a-bridge-network",
			wantPlugins: []string{`{"cniVersion":"0.3.0","type":"awesome-plugin"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.config, tt.nadName)
			if d.Name != tt.wantName || d.CNIVersion != "0.3.0" || d.Source != "test "+tt.nadName {
				t.Errorf("got name %q version %q source %q, want %q 0.3.0", d.Name, d.CNIVersion, d.Source, tt.wantName)
			}
			if len(d.Plugins) != len(tt.wantPlugins) {
				t.Fatalf("got %d plugins, want %d", len(d.Plugins), len(tt.wantPlugins))
			}
			for i, want := range tt.wantPlugins {
				var wantType struct{ Type string }
				if err := json.Unmarshal([]byte(want), &wantType); err != nil {
					t.Fatal(err)
				}
				if d.Plugins[i].Type != wantType.Type {
					t.Errorf("plugins[%d].Type = %q, want %q", i, d.Plugins[i].Type, wantType.Type)
				}
				got, err := encode(d.Plugins[i].Fields)
				if err != nil {
					t.Fatal(err)
				}
				assertJSONEqual(t, got, []byte(want))
			}
		})
	}
}

// 3.4.2.1 and 7.1: the JSON libcni sends the plugin carries the injected
// name and the list's cniVersion.
func TestSpec3_4_2_1_NameInjection(t *testing.T) {
	tests := []struct {
		name, config, nadName, want string
	}{
		{"3.4.2.1 name injected from the object", spec3_4_2_1, "a-bridge-network", spec3_4_2_1Sent},
		{"3.4.3 a different JSON name is kept", `{"cniVersion":"0.3.0","name":"other","type":"awesome-plugin"}`, "a-bridge-network",
			`{"cniVersion":"0.3.0","name":"other","type":"awesome-plugin"}`},
		{"3.4.2 empty name counts as missing", `{"cniVersion":"0.3.0","name":"","type":"awesome-plugin"}`, "a-bridge-network",
			spec3_4_2_1Sent},
		{"7.1 list name and version reach every plugin", `{"cniVersion":"1.0.0","plugins":[{"type":"awesome-plugin","cniVersion":"0.1.0","name":"x"}]}`,
			"a-bridge-network", `{"cniVersion":"1.0.0","name":"a-bridge-network","type":"awesome-plugin"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := libcniList(t, mustParse(t, tt.config, tt.nadName))
			// What libcni's AddNetworkList does before exec'ing the plugin.
			sent, err := libcni.InjectConf(list.Plugins[0], map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
			if err != nil {
				t.Fatal(err)
			}
			assertJSONEqual(t, sent.Bytes, []byte(tt.want))
		})
	}
}

func TestCNIVersions(t *testing.T) {
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		for kind, config := range map[string]string{
			"conf":     `{"cniVersion":"` + v + `","name":"n","type":"bridge"}`,
			"conflist": `{"cniVersion":"` + v + `","name":"n","plugins":[{"type":"bridge"}]}`,
		} {
			t.Run(kind+" "+v, func(t *testing.T) {
				d := mustParse(t, config, "")
				if d.CNIVersion != v {
					t.Errorf("CNIVersion = %q, want %q", d.CNIVersion, v)
				}
				list := libcniList(t, d)
				if list.CNIVersion != v {
					t.Errorf("libcni CNIVersion = %q, want %q", list.CNIVersion, v)
				}
			})
		}
	}
	tests := []struct {
		name, config, want, wantErr string
	}{
		{"CNI spec: missing cniVersion means 0.1.0", `{"name":"n","type":"bridge"}`, "0.1.0", ""},
		{"CNI spec: empty cniVersion means 0.1.0", `{"cniVersion":"","name":"n","plugins":[{"type":"bridge"}]}`, "0.1.0", ""},
		{"unsupported version refused", `{"cniVersion":"9.9.9","name":"n","type":"bridge"}`, "",
			`cniVersion: "9.9.9" is not supported; libcni supports 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0`},
		{"cniVersions picks the newest supported", `{"cniVersion":"0.4.0","cniVersions":["0.3.1","1.0.0","9.9.9"],"name":"n","plugins":[{"type":"bridge"}]}`, "1.0.0", ""},
		{"cniVersions none supported", `{"cniVersions":["9.9.9","2.0.0"],"name":"n","plugins":[{"type":"bridge"}]}`, "",
			`cniVersions: none of ["9.9.9" "2.0.0"]`},
		{"cniVersion wrong type", `{"cniVersion":1.0,"name":"n","type":"bridge"}`, "", `cniVersion: want a string, got 1.0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.config), "", "src")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.CNIVersion != tt.want {
				t.Errorf("CNIVersion = %q, want %q", d.CNIVersion, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, config, nadName, wantErr string
	}{
		{"not JSON", `{"type":`, "n", "config is not valid JSON"},
		{"not UTF-8", "{\"type\":\"br\xffidge\"}", "n", "not valid UTF-8"},
		{"not an object", `["bridge"]`, "n", `config: want a JSON object, got ["bridge"]`},
		{"null", `null`, "n", `config: want a JSON object, got null`},
		{"two documents", `{"type":"a"} {"type":"b"}`, "n", "config is not valid JSON"},
		{"3.4.2 name missing and nothing to inject", `{"type":"bridge"}`, "", "name: missing"},
		{"name wrong type", `{"name":7,"type":"bridge"}`, "n", "name: want a string, got 7"},
		{"neither conf nor list", `{"name":"n","cniVersion":"0.3.0"}`, "n", `neither "type" (a conf) nor "plugins" (a conflist)`},
		{"both conf and list", `{"name":"n","type":"bridge","plugins":[{"type":"x"}]}`, "n", `both "type" (a conf) and "plugins"`},
		{"no plugins", `{"name":"n","plugins":[]}`, "n", "plugins: empty"},
		{"null plugins", `{"name":"n","plugins":null}`, "n", "plugins: empty"},
		{"plugins wrong type", `{"name":"n","plugins":{"type":"bridge"}}`, "n", `plugins: want an array of plugin objects, got {"type":"bridge"}`},
		{"plugin not an object", `{"name":"n","plugins":[{"type":"a"},"tuning"]}`, "n", `plugins[1]: want a JSON object, got "tuning"`},
		{"plugin null", `{"name":"n","plugins":[{"type":"a"},null]}`, "n", `plugins[1]: want a JSON object, got null`},
		{"plugin without type", `{"name":"n","plugins":[{"type":"a"},{"sysctl":{}}]}`, "n", "plugins[1].type: missing"},
		{"conf without type value", `{"name":"n","type":""}`, "n", "type: missing"},
		{"type wrong type", `{"name":"n","plugins":[{"type":42}]}`, "n", "plugins[0].type: want a string, got 42"},
		{"type is a path", `{"name":"n","type":"../../bin/sh"}`, "n", `type: "../../bin/sh" is a path`},
		{"type spelled in another case", `{"name":"n","plugins":[{"type":"a","Type":"b"}]}`, "n", `plugins[0].Type: libcni would read it as "type"`},
		{"capabilities spelled in another case", `{"name":"n","type":"a","Capabilities":{"mac":true}}`, "n", `Capabilities: libcni would read it as "capabilities"`},
		{"capabilities wrong type", `{"name":"n","plugins":[{"type":"a","capabilities":{"mac":"yes"}}]}`, "n",
			`plugins[0].capabilities: want a boolean for each entry, got a JSON string in {"mac":"yes"}`},
		{"capabilities not an object", `{"name":"n","type":"a","capabilities":["mac"]}`, "n", `capabilities: want an object, got ["mac"]`},
		{"libcni: GC attachments wrong type", `{"name":"n","type":"a","cni.dev/valid-attachments":[{"ifname":1}]}`, "n",
			`cni.dev/valid-attachments.ifname: want a string, got a JSON number in [{"ifname":1}]`},
		{"libcni: ipam wrong type, any case", `{"name":"n","plugins":[{"type":"0","ipAm":""}]}`, "n", `plugins[0].ipam: want an object, got a JSON string`},
		{"libcni: ipam.type wrong type", `{"name":"n","type":"a","ipam":{"type":5}}`, "n", `ipam.type: want a string, got a JSON number in {"type":5}`},
		{"libcni: dns.nameservers wrong type", `{"name":"n","type":"a","dns":{"nameservers":"10.0.0.1"}}`, "n",
			`dns.nameservers: want an array, got a JSON string in {"nameservers":"10.0.0.1"}`},
		{"libcni: prevResult wrong type", `{"name":"n","plugins":[{"type":"a","prevResult":[]}]}`, "n", `plugins[0].prevResult: want an object, got []`},
		{"disableCheck wrong value", `{"name":"n","disableCheck":"maybe","plugins":[{"type":"a"}]}`, "n", `disableCheck: want true or false, got "maybe"`},
		{"disableGC wrong type", `{"name":"n","disableGC":1,"plugins":[{"type":"a"}]}`, "n", `disableGC: want true or false, got 1`},
		{"long bad value is cut", `{"name":"n","type":"a","capabilities":"` + strings.Repeat("x", 100) + `"}`, "n", `got "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.config), tt.nadName, "NetworkAttachmentDefinition ns/n spec.config")
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", d)
			}
			if !strings.HasPrefix(err.Error(), "NetworkAttachmentDefinition ns/n spec.config: ") {
				t.Errorf("error %q does not start with its source", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseListKeys(t *testing.T) {
	tests := []struct {
		name, config      string
		wantCheck, wantGC bool
	}{
		{"booleans", `{"name":"n","disableCheck":true,"disableGC":true,"plugins":[{"type":"a"}]}`, true, true},
		{"libcni string form", `{"name":"n","disableCheck":"TRUE","disableGC":"false","plugins":[{"type":"a"}]}`, true, false},
		{"absent", `{"name":"n","plugins":[{"type":"a"}]}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := mustParse(t, tt.config, "")
			if d.DisableCheck != tt.wantCheck || d.DisableGC != tt.wantGC {
				t.Errorf("DisableCheck %v DisableGC %v, want %v %v", d.DisableCheck, d.DisableGC, tt.wantCheck, tt.wantGC)
			}
			list := libcniList(t, d)
			if list.DisableCheck != tt.wantCheck || list.DisableGC != tt.wantGC {
				t.Errorf("libcni DisableCheck %v DisableGC %v, want %v %v", list.DisableCheck, list.DisableGC, tt.wantCheck, tt.wantGC)
			}
		})
	}
}

// Bytes must hand libcni exactly what was parsed, unknown keys included, and
// re-parse to the same Delegate.
func TestBytesRoundTripsThroughLibcni(t *testing.T) {
	configs := map[string]string{
		"3.2.1":   spec3_2_1,
		"3.2.2":   spec3_2_2,
		"3.2.3":   spec3_2_3,
		"sriov":   sriovList,
		"escapes": `{"name":"a<b>&c","type":"x","note":"<\u00e9>","big":12345678901234567890,"nested":{"z":[1,{"y":null}]}}`,
	}
	for name, config := range configs {
		t.Run(name, func(t *testing.T) {
			d := mustParse(t, config, "nad")
			b, err := d.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			list, err := libcni.NetworkConfFromBytes(b)
			if err != nil {
				t.Fatalf("libcni refused %s: %v", b, err)
			}
			if list.Name != d.Name || list.CNIVersion != d.CNIVersion || len(list.Plugins) != len(d.Plugins) {
				t.Fatalf("libcni read %q %q with %d plugins, want %q %q with %d", list.Name, list.CNIVersion, len(list.Plugins),
					d.Name, d.CNIVersion, len(d.Plugins))
			}
			for i, p := range d.Plugins {
				if list.Plugins[i].Network.Type != p.Type || !maps.Equal(list.Plugins[i].Network.Capabilities, p.Capabilities) {
					t.Errorf("plugins[%d]: libcni read type %q capabilities %v, want %q %v", i,
						list.Plugins[i].Network.Type, list.Plugins[i].Network.Capabilities, p.Type, p.Capabilities)
				}
				want, _ := encode(p.Fields)
				assertJSONEqual(t, list.Plugins[i].Bytes, want)
			}
			again, err := Parse(b, "nad", d.Source)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, d) {
				t.Errorf("re-parse differs:\n got %+v\nwant %+v", again, d)
			}
		})
	}
}
