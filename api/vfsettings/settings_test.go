package vfsettings_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

const src = `claim ns/c config[0] "vf"`

// TestParse: a claim's "vf" takes the kernel's ranges; a bad value fails
// naming the field and the value; names and cases are normalized.
func TestParse(t *testing.T) {
	tests := []struct {
		name, raw, wantErr string
		check              func(vfsettings.Settings) bool
	}{
		{"every key", `{"vlan":100,"vlanQoS":7,"vlanProto":"802.1ad","spoofchk":false,"trust":true,"minTxRate":10,"maxTxRate":1000,"linkState":"disable","mtu":9000,"macAddress":"02:AA:00:00:00:01"}`, "",
			func(s vfsettings.Settings) bool {
				return *s.VLAN == 100 && s.VLANProto == "802.1ad" && s.MAC == "02:aa:00:00:00:01"
			}},
		{"proto case", `{"vlan":1,"vlanProto":"802.1q"}`, "", func(s vfsettings.Settings) bool { return s.VLANProto == "802.1Q" }},
		{"max rate 0 is no limit", `{"minTxRate":100,"maxTxRate":0}`, "", func(s vfsettings.Settings) bool { return *s.MinTxRate == 100 }},
		{"vlan too big", `{"vlan":4096}`, `"vlan" 4096: want 0 to 4095`, nil},
		{"vlan negative", `{"vlan":-1}`, `"vlan" -1: want 0 to 4095`, nil},
		{"qos too big", `{"vlan":5,"vlanQoS":8}`, `"vlanQoS" 8: want 0 to 7`, nil},
		{"qos without vlan", `{"vlanQoS":3}`, `"vlanQoS" 3: needs a non-zero "vlan"`, nil},
		{"802.1ad without vlan", `{"vlan":0,"vlanProto":"802.1ad"}`, `"vlanProto" "802.1ad": needs a non-zero "vlan"`, nil},
		{"bad proto", `{"vlan":5,"vlanProto":"qinq"}`, `"vlanProto" "qinq": want "802.1Q" or "802.1ad"`, nil},
		{"min over max", `{"minTxRate":2000,"maxTxRate":1000}`, `"minTxRate" 2000: more than "maxTxRate" 1000`, nil},
		{"rate over u32", `{"maxTxRate":4294967296}`, `"maxTxRate" 4294967296: want at most 4294967295`, nil},
		{"negative rate", `{"maxTxRate":-1}`, `cannot unmarshal number -1`, nil},
		{"bad link state", `{"linkState":"up"}`, `"linkState" "up": want "auto", "enable" or "disable"`, nil},
		{"mtu too small", `{"mtu":67}`, `"mtu" 67: want 68 to 65535`, nil},
		{"bad mac", `{"macAddress":"zz:11"}`, `"macAddress" "zz:11": want a 6-byte MAC address`, nil},
		{"multicast mac", `{"macAddress":"01:00:5e:00:00:01"}`, `"macAddress" "01:00:5e:00:00:01": a multicast address`, nil},
		{"zero mac", `{"macAddress":"00:00:00:00:00:00"}`, `the zero address`, nil},
		{"20-byte mac", `{"macAddress":"00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10:00:00:00:01"}`, `want a 6-byte MAC address`, nil},
		{"pkey", `{"pKey":"0x8001"}`, "", func(s vfsettings.Settings) bool { return s.PKey == "0x8001" }},
		{"pkey normalized", `{"pKey":"0X7FF"}`, "", func(s vfsettings.Settings) bool { return s.PKey == "0x07ff" }},
		{"pkey invalid", `{"pKey":"0x0000"}`, `"pKey" "0x0000": the invalid partition key`, nil},
		{"pkey invalid full", `{"pKey":"0x8000"}`, `"pKey" "0x8000": the invalid partition key`, nil},
		{"pkey without 0x", `{"pKey":"8001"}`, `"pKey" "8001": want 0x and up to four hex digits`, nil},
		{"pkey too wide", `{"pKey":"0x18001"}`, `"pKey" "0x18001": want 0x and up to four hex digits`, nil},
		{"pkey signed", `{"pKey":"0x+801"}`, `"pKey" "0x+801": want 0x`, nil},
		{"pkey as a number", `{"pKey":32769}`, `cannot unmarshal number`, nil},
		{"sriov-cni's spelling", `{"max_tx_rate":1000}`, `unknown field "max_tx_rate"`, nil},
		{"spoofchk as a string", `{"spoofchk":"on"}`, `cannot unmarshal string`, nil},
		{"oversize", `{"linkState":"` + strings.Repeat("a", vfsettings.MaxSize) + `"}`, `more than the 1024`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := vfsettings.Parse(json.RawMessage(tt.raw), src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.HasPrefix(err.Error(), src) {
					t.Fatalf("err %v, want one starting %q containing %q", err, src, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(s) {
				t.Fatalf("%+v (%v)", s, err)
			}
		})
	}
}

// TestDefaults: a record without the VF's prior settings (written before
// hwnet read them) is reset to the kernel's defaults for a new VF, the
// VF's own MTU, and a MAC the PF does not administer (never the netdev's
// MAC, which the PF would then administer); an MTU without a recorded
// original is left alone.
func TestDefaults(t *testing.T) {
	var all vfsettings.Settings
	if err := json.Unmarshal([]byte(`{"vlan":100,"vlanQoS":2,"spoofchk":false,"trust":true,"maxTxRate":1000,"linkState":"enable","mtu":9000,"macAddress":"02:00:00:00:00:01"}`), &all); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		rec  vfsettings.Record
		want string
	}{
		{"everything", vfsettings.Record{Settings: all, Original: vfsettings.Original{MAC: "52:54:00:00:00:07", MTU: 1500}},
			`{"vlan":0,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":true,"trust":false,"minTxRate":0,"maxTxRate":0,"linkState":"auto","mtu":1500,"macAddress":"00:00:00:00:00:00"}`},
		{"no originals", vfsettings.Record{Settings: all},
			`{"vlan":0,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":true,"trust":false,"minTxRate":0,"maxTxRate":0,"linkState":"auto","macAddress":"00:00:00:00:00:00"}`},
		{"only a rate", vfsettings.Record{Settings: vfsettings.Settings{MaxTxRate: all.MaxTxRate}}, `{"minTxRate":0,"maxTxRate":0}`},
		{"nothing", vfsettings.Record{}, `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.rec.Defaults())
			if err != nil || string(got) != tt.want {
				t.Errorf("defaults %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

// TestRestore: a reset puts back, for each field hwnet set, what the PF
// reported before the first change (an admin's VLAN 42 and spoofchk off
// stay theirs), the MAC as the PF reported it (unset, 00:..:00, too);
// fields hwnet did not set are not touched, and a prior that lacks a
// field falls back to its default.
func TestRestore(t *testing.T) {
	var set, prior vfsettings.Settings
	if err := json.Unmarshal([]byte(`{"vlan":100,"vlanQoS":2,"spoofchk":true,"trust":true,"maxTxRate":1000,"linkState":"enable","mtu":9000,"macAddress":"02:00:00:00:00:01"}`), &set); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(`{"vlan":42,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":false,"trust":false,"minTxRate":10,"maxTxRate":500,"linkState":"disable","mtu":1500,"macAddress":"00:00:00:00:00:00"}`), &prior); err != nil {
		t.Fatal(err)
	}
	vlan := 42
	tests := []struct {
		name string
		rec  vfsettings.Record
		want string
	}{
		{"everything", vfsettings.Record{Settings: set, Prior: &prior, Original: vfsettings.Original{MAC: "52:54:00:00:00:07", MTU: 1400}},
			`{"vlan":42,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":false,"trust":false,"minTxRate":10,"maxTxRate":500,"linkState":"disable","mtu":1500,"macAddress":"00:00:00:00:00:00"}`},
		{"only what was set", vfsettings.Record{Settings: vfsettings.Settings{VLAN: set.VLAN}, Prior: &prior}, `{"vlan":42,"vlanQoS":0,"vlanProto":"802.1Q"}`},
		{"a prior without a field", vfsettings.Record{Settings: set, Prior: &vfsettings.Settings{VLAN: &vlan}, Original: vfsettings.Original{MTU: 1400}},
			`{"vlan":42,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":true,"trust":false,"minTxRate":0,"maxTxRate":0,"linkState":"auto","mtu":1400,"macAddress":"00:00:00:00:00:00"}`},
		{"an older record", vfsettings.Record{Settings: vfsettings.Settings{SpoofChk: prior.SpoofChk}}, `{"spoofchk":true}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.rec.Restore())
			if err != nil || string(got) != tt.want {
				t.Errorf("restore %s (%v), want %s", got, err, tt.want)
			}
		})
	}
}

// FuzzParse: any "vf" object parses or fails with an error naming the
// source; what parses validates again unchanged and round-trips.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"vlan":100,"maxTxRate":1000}`, `{"vlan":5,"vlanQoS":3,"vlanProto":"802.1AD"}`, `{"macAddress":"02:00:00:00:00:01","mtu":9000}`, `{"linkState":"auto"}`, `{"pKey":"0x8001"}`, `{}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := vfsettings.Parse(raw, src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), src) {
				t.Fatalf("error %q does not name the source", err)
			}
			return
		}
		again := s
		if err := again.Validate(src); err != nil || again != s {
			t.Fatalf("parsed %+v does not validate unchanged: %+v, %v", s, again, err)
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		back, err := vfsettings.Parse(out, src)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if reenc, _ := json.Marshal(back); string(reenc) != string(out) {
			t.Fatalf("round trip %s -> %s", out, reenc)
		}
	})
}

// FuzzParsePKey: a key parses only as 0x and one to four hex digits with
// a valid partition (low 15 bits not zero), and its kernel form parses to
// the same key.
func FuzzParsePKey(f *testing.F) {
	for _, s := range []string{"0x8001", "0xffff", "0x7fff", "0x0", "0x8000", "8001", "0x", "0x00001", " 0x1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := vfsettings.ParsePKey(s)
		if err != nil {
			return
		}
		if k&0x7fff == 0 || len(s) < 3 || len(s) > 6 || !strings.EqualFold(s[:2], "0x") {
			t.Fatalf("%q parsed to %#x", s, k)
		}
		back, err := vfsettings.ParsePKey(vfsettings.FormatPKey(k))
		if err != nil || back != k {
			t.Fatalf("%q: %#x formats to %q, which parses to %#x (%v)", s, k, vfsettings.FormatPKey(k), back, err)
		}
	})
}
