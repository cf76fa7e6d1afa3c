package netconf

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestVFSettings_SRIOVCNIKeys: a NetworkAttachmentDefinition's sriov-cni
// keys, in sriov-cni's names and types, are the typed VF settings; a bad
// one fails naming the key as the NAD spells it; sriov-cni's own list is
// left to sriov-cni.
func TestVFSettings_SRIOVCNIKeys(t *testing.T) {
	const src = "NetworkAttachmentDefinition ns/n spec.config"
	conf := func(plugin string) string {
		return `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"host-device"` + plugin + `},{"type":"tuning"}]}`
	}
	tests := []struct {
		name, config, wantErr string
		check                 string // the settings as JSON, "{}" for none
	}{
		{"every key", conf(`,"vlan":100,"vlanQoS":2,"vlanProto":"802.1ad","spoofchk":"off","trust":"on","min_tx_rate":10,"max_tx_rate":1000,"link_state":"enable","mac":"02:00:00:00:00:01","mtu":9000`), "",
			`{"vlan":100,"vlanQoS":2,"vlanProto":"802.1ad","spoofchk":false,"trust":true,"minTxRate":10,"maxTxRate":1000,"linkState":"enable","mtu":9000,"macAddress":"02:00:00:00:00:01"}`},
		{"none", conf(``), "", `{}`},
		{"sriov-cni sets its own", `{"cniVersion":"1.0.0","name":"n","type":"sriov","vlan":100}`, "", `{}`},
		{"bad vlan", conf(`,"vlan":5000`), src + `: plugins[0]: "vlan" 5000: want 0 to 4095`, ""},
		{"vlan a string", conf(`,"vlan":"100"`), src + `: plugins[0].vlan: want an integer, got "100"`, ""},
		{"spoofchk a bool", conf(`,"spoofchk":true`), src + `: plugins[0].spoofchk: want "on" or "off", got true`, ""},
		{"trust yes", conf(`,"trust":"yes"`), src + `: plugins[0].trust: want "on" or "off", got "yes"`, ""},
		{"negative rate", conf(`,"max_tx_rate":-1`), src + `: plugins[0].max_tx_rate: want a non-negative integer (Mbit/s), got -1`, ""},
		{"min over max in sriov-cni's names", conf(`,"min_tx_rate":20,"max_tx_rate":10`), src + `: plugins[0]: "min_tx_rate" 20: more than "max_tx_rate" 10`, ""},
		{"bad link state", conf(`,"link_state":"up"`), src + `: plugins[0]: "link_state" "up": want "auto", "enable" or "disable"`, ""},
		{"bad mac", conf(`,"mac":"zz"`), src + `: plugins[0]: "mac" "zz": want a 6-byte MAC address`, ""},
		{"keys in another case, as sriov-cni reads them", conf(`,"VLAN":100,"Trust":"on"`), "", `{"vlan":100,"trust":true}`},
		{"a key twice in two cases", conf(`,"vlan":0,"Vlan":300`), src + `: plugins[0]: ["Vlan" "vlan"] are all sriov-cni's "vlan", which takes the last: keep one`, ""},
		{"a key in another case, bad", conf(`,"SpoofChk":"yes"`), src + `: plugins[0].SpoofChk: want "on" or "off", got "yes"`, ""},
		{"pkey", conf(`,"pkey":"0x8001"`), "", `{"pKey":"0x8001"}`},
		{"ib-sriov-cni's own pkey", `{"cniVersion":"1.0.0","name":"n","type":"ib-sriov","pkey":"0x8001"}`, "", `{}`},
		{"invalid pkey", conf(`,"pkey":"0x8000"`), src + `: plugins[0]: "pkey" "0x8000": the invalid partition key`, ""},
		{"pkey a number", conf(`,"pkey":32769`), src + `: plugins[0].pkey: want a string such as "0x8001", got 32769`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Parse([]byte(tt.config), "n", src)
			if err != nil {
				t.Fatal(err)
			}
			s, err := d.VFSettings()
			if tt.wantErr != "" {
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := string(mustJSON(t, s)); got != tt.check {
				t.Errorf("settings %s, want %s", got, tt.check)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// FuzzVFSettings: any first plugin's sriov-cni keys give valid settings or
// an error naming the source, never a panic.
func FuzzVFSettings(f *testing.F) {
	for _, seed := range []string{`"vlan":100,"max_tx_rate":1000`, `"spoofchk":"off","trust":"on"`, `"vlanProto":"802.1AD","vlan":4,"vlanQoS":7`,
		`"mac":"02:00:00:00:00:01","mtu":9000,"link_state":"disable"`, `"min_tx_rate":-1`, `"spoofchk":1`, `"pkey":"0x8001"`, `"pkey":"0x8000"`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, keys string) {
		d, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"host-device",`+keys+`}]}`), "n", "fuzz")
		if err != nil {
			return
		}
		vf, err := d.VFSettings()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz: ") {
				t.Fatalf("error %q does not name the source", err)
			}
			return
		}
		if again := vf; again.Validate("fuzz") != nil || again != vf {
			t.Fatalf("VF settings %+v accepted but not valid", vf)
		}
	})
}

// TestVFKeys_SRIOVCNIReadsAnyCase: what the VFSettingsPolicy judges of a
// NAD whose first plugin is sriov-cni is what sriov-cni reads, whose JSON
// decoding takes "VLAN" for "vlan": a tenant cannot spell a key past it.
func TestVFKeys_SRIOVCNIReadsAnyCase(t *testing.T) {
	d, err := Parse([]byte(`{"cniVersion":"1.0.0","name":"n","type":"sriov","VLAN":300,"TRUST":"on"}`), "n", "nad")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.VFKeys()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(mustJSON(t, s)), `{"vlan":300,"trust":true}`; got != want {
		t.Errorf("sriov-cni's keys as the policy judges them: %s, want %s", got, want)
	}
}
