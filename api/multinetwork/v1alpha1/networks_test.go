package v1alpha1

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestKEP3698_StaticValidations_ParseNetworks(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		want        int
		wantErr     string
	}{
		{name: "empty", value: "", want: 0},
		{name: "one", value: `[{"name":"dataplane"}]`, want: 1},
		{name: "attachment", value: `[{"attachmentName":"fast","interfaceName":"net2","isDefaultGW":true}]`, want: 1},
		{name: "both", value: `[{"name":"a","attachmentName":"b"}]`, wantErr: `networks[0]: exactly one of "name" and "attachmentName"`},
		{name: "dup-name", value: `[{"name":"a"},{"name":"a"}]`, wantErr: `networks[1].name: PodNetwork "a"`},
		{name: "dup-if", value: `[{"name":"a","interfaceName":"x"},{"name":"b","interfaceName":"x"}]`, wantErr: `networks[1].interfaceName: "x"`},
		{name: "two-gw", value: `[{"name":"a","isDefaultGW":true},{"name":"b","isDefaultGW":true}]`, wantErr: "networks[1].isDefaultGW"},
		{name: "long-if", value: `[{"name":"a","interfaceName":"abcdefghijklmnop"}]`, wantErr: `interfaceName "abcdefghijklmnop": must be 1 to 15 bytes`},
		{name: "dot-if", value: `[{"name":"a","interfaceName":".."}]`, wantErr: `interfaceName ".."`},
		{name: "bad-name", value: `[{"name":"A"}]`, wantErr: `name "A"`},
		{name: "unknown", value: `[{"name":"a","ips":[]}]`, wantErr: `networks[0]: key "ips"`},
		{name: "null-name", value: `[{"name":null,"attachmentName":"b"}]`, wantErr: "networks[0]: name: null is not a string"},
		{name: "string-gw", value: `[{"name":"a","isDefaultGW":"true"}]`, wantErr: `networks[0]: isDefaultGW: "true" is not true or false`},
		{name: "utf8-if", value: "[{\"name\":\"a\",\"interfaceName\":\"\xff\"}]", wantErr: "printable ASCII"},
		{name: "trailing", value: `[] []`, wantErr: "data after"},
		{name: "object", value: `{}`, wantErr: "not a JSON list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nets, err := ParseNetworks(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), NetworksAnnotation) {
					t.Fatalf("err %v, want one naming the annotation and %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || len(nets) != tc.want {
				t.Fatalf("got %d networks, %v; want %d", len(nets), err, tc.want)
			}
		})
	}
}

func FuzzParseNetworks(f *testing.F) {
	for _, seed := range []string{``, `[{"name":"a","interfaceName":"net1","isDefaultGW":true}]`,
		`[{"attachmentName":"b"},{"name":"c"}]`, `[{"name":"a"},{"name":"a"}]`, `[{"name":"\u0061"}]`,
		// The rules the admission policy shares (deploy/multinetwork_parity_test.go).
		" \v\u00a0", `null`, `[{"name":"a"}]]`, `[{"Name":"a"}]`, `[{"name":"a","interfaceName":"x","interfaceName":"y"}]`,
		`[{"name":"","attachmentName":"b"}]`, `[{"name":"a","isDefaultGW":null}]`, `[{"name":"a","interfaceName":"ééééééé1"}]`,
		`[{"name":"a","interfaceName":"n-1_[x]{y},z"}]`, "[\f]"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, value string) {
		nets, err := ParseNetworks(value)
		if err != nil {
			return
		}
		checkAccepted(t, value, nets)
	})
}

// checkAccepted: what ParseNetworks accepts obeys the static validations,
// is plain JSON (no escapes) and reads the same through encoding/json, so
// any JSON reader sees the references hwnet sees.
func checkAccepted(t *testing.T, value string, nets []Network) {
	t.Helper()
	if strings.TrimSpace(value) == "" {
		return
	}
	var plain []Network
	if strings.Contains(value, `\`) || json.Unmarshal([]byte(value), &plain) != nil || !slices.Equal(plain, nets) {
		t.Fatalf("%q accepted as %+v; encoding/json reads %+v", value, nets, plain)
	}
	if len(nets) > MaxNetworks {
		t.Fatalf("%d networks accepted, more than %d", len(nets), MaxNetworks)
	}
	seen := map[string]bool{}
	gw := 0
	for i, n := range nets {
		if (n.Name == "") == (n.AttachmentName == "") {
			t.Fatalf("networks[%d] accepted with name %q and attachmentName %q", i, n.Name, n.AttachmentName)
		}
		if n.InterfaceName != "" && (seen[n.InterfaceName] || ValidateInterfaceName(n.InterfaceName) != nil) {
			t.Fatalf("networks[%d]: interface %q accepted twice or invalid", i, n.InterfaceName)
		}
		seen[n.InterfaceName] = true
		if n.IsDefaultGW {
			gw++
		}
	}
	if gw > 1 {
		t.Fatalf("%d networks hold the default gateway", gw)
	}
}
