package vfpolicy

import (
	"strings"
	"testing"
)

func TestDecodeSpec(t *testing.T) {
	tests := []struct {
		name, spec, wantErr string
	}{
		{"empty rules", `{"rules": []}`, ""},
		{"full rule", `{"rules": [{"name": "team-a", "namespaces": ["team-a"],
			"namespaceSelector": {"matchLabels": {"hwnet.io/tenant": "a"}},
			"allow": {"vlans": [{"min": 100, "max": 199}], "vlanQoS": true, "vlanProto8021ad": true,
			"maxTxRateMbps": 10000, "trust": true, "spoofchkOff": true, "macAddress": true, "linkState": true, "mtu": true}}]}`, ""},
		{"unknown key", `{"rules": [], "extra": 1}`, `unknown field "extra"`},
		{"matchExpressions", `{"rules": [{"name": "a", "namespaceSelector": {"matchExpressions": []}}]}`, `unknown field "matchExpressions"`},
		{"trailing data", `{"rules": []} {}`, "data after the object"},
		{"rule name not a DNS label", `{"rules": [{"name": "Team_A"}]}`, `spec.rules[0].name "Team_A"`},
		{"rule name empty", `{"rules": [{"name": ""}]}`, `spec.rules[0].name ""`},
		{"duplicate name", `{"rules": [{"name": "a"}, {"name": "a"}]}`, `spec.rules[1].name "a": rule 0 has it already`},
		{"bad namespace", `{"rules": [{"name": "a", "namespaces": ["ok", "No"]}]}`, `spec.rules[0].namespaces[1] "No"`},
		{"bad label key", `{"rules": [{"name": "a", "namespaceSelector": {"matchLabels": {"-x": "a"}}}]}`, `matchLabels key "-x"`},
		{"bad label value", `{"rules": [{"name": "a", "namespaceSelector": {"matchLabels": {"x": "a b"}}}]}`, `matchLabels["x"] "a b"`},
		{"vlan 0", `{"rules": [{"name": "a", "allow": {"vlans": [{"min": 0, "max": 10}]}}]}`, "spec.rules[0].allow.vlans[0].min 0: want 1 to 4094"},
		{"vlan 4095", `{"rules": [{"name": "a", "allow": {"vlans": [{"min": 1, "max": 4095}]}}]}`, "spec.rules[0].allow.vlans[0].max 4095: want 1 to 4094"},
		{"min over max", `{"rules": [{"name": "a", "allow": {"vlans": [{"min": 20, "max": 10}]}}]}`, "spec.rules[0].allow.vlans[0]: min 20 is more than max 10"},
		{"rate over u32", `{"rules": [{"name": "a", "allow": {"maxTxRateMbps": 4294967296}}]}`, "maxTxRateMbps 4294967296"},
		{"pkeys", `{"rules": [{"name": "a", "allow": {"pKeys": ["0x8001", "0x7fff"]}}]}`, ""},
		{"pkey invalid", `{"rules": [{"name": "a", "allow": {"pKeys": ["0x8001", "0x8000"]}}]}`, `spec.rules[0].allow.pKeys[1] "0x8000": the invalid partition key`},
		{"pkey not as the kernel writes it", `{"rules": [{"name": "a", "allow": {"pKeys": ["0x801"]}}]}`, `spec.rules[0].allow.pKeys[0] "0x801": want it as 0x0801`},
		{"too many pkeys", `{"rules": [{"name": "a", "allow": {"pKeys": [` + repeat(`"0x8001"`, MaxPKeys+1) + `]}}]}`, "65 keys, want at most 64"},
		{"negative rate", `{"rules": [{"name": "a", "allow": {"maxTxRateMbps": -1}}]}`, "cannot unmarshal"},
		{"too many rules", `{"rules": [` + repeat(`{"name": "r"}`, MaxRules+1) + `]}`, "65 rules, want at most 64"},
		{"too many namespaces", `{"rules": [{"name": "a", "namespaces": [` + repeat(`"n"`, MaxNamespaces+1) + `]}]}`, "257 names, want at most 256"},
		{"too many ranges", `{"rules": [{"name": "a", "allow": {"vlans": [` + repeat(`{"min": 1, "max": 2}`, MaxVLANRanges+1) + `]}}]}`, "65 ranges"},
		{"too large", `{"rules": [], "x": "` + strings.Repeat("a", MaxSize) + `"}`, "more than"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeSpec([]byte(tc.spec))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("DecodeSpec: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("DecodeSpec: error %v, want one with %q", err, tc.wantErr)
			}
		})
	}
}

func TestTooManyMatchLabels(t *testing.T) {
	labels := map[string]string{}
	for i := range MaxMatchLabels + 1 {
		labels[string(rune('a'+i))] = "x"
	}
	s := Spec{Rules: []Rule{{Name: "a", NamespaceSelector: &Selector{MatchLabels: labels}}}}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "17 labels, want at most 16") {
		t.Fatalf("Validate: %v", err)
	}
}

// repeat joins n copies of elem with commas, names made unique.
func repeat(elem string, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = elem
		if strings.Contains(elem, `"r"`) {
			parts[i] = strings.Replace(elem, `"r"`, `"r`+itoa(i)+`"`, 1)
		}
	}
	return strings.Join(parts, ",")
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add([]byte(`{"rules": []}`))
	f.Add([]byte(`{"rules": [{"name": "a", "namespaces": ["x"], "allow": {"vlans": [{"min": 1, "max": 4094}], "maxTxRateMbps": 0}}]}`))
	f.Add([]byte(`{"rules": [{"name": "a", "namespaceSelector": {"matchLabels": {"k": "v"}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeSpec(data)
		if err != nil {
			return
		}
		// What decodes is valid, and evaluating it never panics.
		if err := s.Validate(); err != nil {
			t.Fatalf("decoded spec fails Validate: %v", err)
		}
		vlan := 100
		_ = Evaluate(View{Spec: &s}, Namespace{Name: "x", Labels: map[string]string{"k": "v"}}, settingsWith(func(v *settingsT) { v.VLAN = &vlan }), ClaimSpelling)
	})
}
