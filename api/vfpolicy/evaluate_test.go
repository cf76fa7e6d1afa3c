package vfpolicy

import (
	"errors"
	"testing"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

type settingsT = vfsettings.Settings

func settingsWith(f func(*settingsT)) settingsT {
	var s settingsT
	f(&s)
	return s
}

func ptr[T any](v T) *T { return &v }

// policy is the example of the contract, with a second rule by selector
// and a third that allows everything to check that the first match wins.
func policy() *Spec {
	return &Spec{Rules: []Rule{
		{Name: "team-a", Namespaces: []string{"team-a"}, Allow: Allow{
			VLANs: []VLANRange{{Min: 100, Max: 199}, {Min: 300, Max: 300}}, MaxTxRateMbps: ptr[uint64](10000), PKeys: []string{"0x8001", "0x0002"}}},
		{Name: "tenant-b", NamespaceSelector: &Selector{MatchLabels: map[string]string{"hwnet.io/tenant": "b"}}, Allow: Allow{
			VLANs: []VLANRange{{Min: 1, Max: 4094}}, VLANQoS: true, VLANProto8021ad: true, Trust: true, SpoofchkOff: true,
			MACAddress: true, LinkState: true, MTU: true}},
		{Name: "empty-selector", NamespaceSelector: &Selector{}, Allow: Allow{Trust: true}},
		{Name: "all", Namespaces: []string{"team-a", "open"}, Allow: Allow{Trust: true, MTU: true}},
	}}
}

func TestEvaluate(t *testing.T) {
	teamA := Namespace{Name: "team-a"}
	tenantB := Namespace{Name: "b-prod", Labels: map[string]string{"hwnet.io/tenant": "b", "other": "x"}}
	nobody := Namespace{Name: "nobody", Labels: map[string]string{"hwnet.io/tenant": "c"}}
	tests := []struct {
		name string
		ns   Namespace
		s    settingsT
		sp   Spelling
		want string // "" allowed
	}{
		{"nothing asked, no rule", nobody, settingsT{}, ClaimSpelling, ""},
		{"vlan in range", teamA, settingsT{VLAN: ptr(150)}, ClaimSpelling, ""},
		{"vlan in second range", teamA, settingsT{VLAN: ptr(300)}, NADSpelling, ""},
		{"vlan out of range", teamA, settingsT{VLAN: ptr(200)}, ClaimSpelling,
			"VF setting vf.vlan=200 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"vlan 0 is a VLAN setting", teamA, settingsT{VLAN: ptr(0)}, NADSpelling,
			"VF setting vlan=0 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"qos alone sets VLAN 0", tenantB, settingsT{VLANQoS: ptr(0)}, ClaimSpelling,
			"VF setting vf.vlanQoS=0 refused by VFSettingsPolicy hwnet rule tenant-b for namespace b-prod"},
		{"qos 0 with an allowed vlan", teamA, settingsT{VLAN: ptr(100), VLANQoS: ptr(0)}, ClaimSpelling, ""},
		{"qos not allowed", teamA, settingsT{VLAN: ptr(100), VLANQoS: ptr(3)}, NADSpelling,
			"VF setting vlanQoS=3 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"qos allowed", tenantB, settingsT{VLAN: ptr(100), VLANQoS: ptr(3)}, ClaimSpelling, ""},
		{"802.1Q always", teamA, settingsT{VLAN: ptr(100), VLANProto: vfsettings.ProtoDot1Q}, ClaimSpelling, ""},
		{"802.1ad not allowed", teamA, settingsT{VLAN: ptr(100), VLANProto: vfsettings.ProtoDot1AD}, ClaimSpelling,
			"VF setting vf.vlanProto=802.1ad refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"802.1ad allowed", tenantB, settingsT{VLAN: ptr(4094), VLANProto: vfsettings.ProtoDot1AD}, NADSpelling, ""},
		{"spoofchk on always", teamA, settingsT{SpoofChk: ptr(true)}, NADSpelling, ""},
		{"spoofchk off refused", teamA, settingsT{SpoofChk: ptr(false)}, NADSpelling,
			"VF setting spoofchk=off refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"spoofchk off allowed", tenantB, settingsT{SpoofChk: ptr(false)}, ClaimSpelling, ""},
		{"trust off always", teamA, settingsT{Trust: ptr(false)}, ClaimSpelling, ""},
		{"trust on refused", teamA, settingsT{Trust: ptr(true)}, ClaimSpelling,
			"VF setting vf.trust=true refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"trust on NAD spelling", teamA, settingsT{Trust: ptr(true)}, NADSpelling,
			"VF setting trust=on refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"trust on allowed", tenantB, settingsT{Trust: ptr(true)}, ClaimSpelling, ""},
		{"rates under the ceiling", teamA, settingsT{MinTxRate: ptr[uint64](100), MaxTxRate: ptr[uint64](10000)}, ClaimSpelling, ""},
		{"min rate over the ceiling", teamA, settingsT{MinTxRate: ptr[uint64](10001)}, NADSpelling,
			"VF setting min_tx_rate=10001 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"max rate over the ceiling", teamA, settingsT{MaxTxRate: ptr[uint64](20000)}, ClaimSpelling,
			"VF setting vf.maxTxRate=20000 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"max rate 0 lifts the ceiling", teamA, settingsT{MaxTxRate: ptr[uint64](0)}, NADSpelling,
			"VF setting max_tx_rate=0 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"min rate 0 under a ceiling", teamA, settingsT{MinTxRate: ptr[uint64](0)}, NADSpelling, ""},
		{"rate without a ceiling", tenantB, settingsT{MaxTxRate: ptr[uint64](1)}, ClaimSpelling,
			"VF setting vf.maxTxRate=1 refused by VFSettingsPolicy hwnet rule tenant-b for namespace b-prod"},
		{"link state refused", teamA, settingsT{LinkState: vfsettings.LinkEnable}, NADSpelling,
			"VF setting link_state=enable refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"link state allowed", tenantB, settingsT{LinkState: vfsettings.LinkDisable}, ClaimSpelling, ""},
		{"mtu refused", teamA, settingsT{MTU: ptr(9000)}, ClaimSpelling,
			"VF setting vf.mtu=9000 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"mtu allowed", tenantB, settingsT{MTU: ptr(9000)}, NADSpelling, ""},
		{"mac refused", teamA, settingsT{MAC: "02:00:00:00:00:01"}, NADSpelling,
			"VF setting mac=02:00:00:00:00:01 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"mac refused, claim", teamA, settingsT{MAC: "02:00:00:00:00:01"}, ClaimSpelling,
			"VF setting vf.macAddress=02:00:00:00:00:01 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"mac allowed", tenantB, settingsT{MAC: "02:00:00:00:00:01"}, ClaimSpelling, ""},
		{"pkey allowed", teamA, settingsT{PKey: "0x8001"}, ClaimSpelling, ""},
		{"limited membership allowed", teamA, settingsT{PKey: "0x0002"}, NADSpelling, ""},
		{"full membership not the limited one allowed", teamA, settingsT{PKey: "0x8002"}, NADSpelling,
			"VF setting pkey=0x8002 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"pkey refused, claim", tenantB, settingsT{PKey: "0x8001"}, ClaimSpelling,
			"VF setting vf.pKey=0x8001 refused by VFSettingsPolicy hwnet rule tenant-b for namespace b-prod"},
		{"no rule: pkey", nobody, settingsT{PKey: "0xffff"}, NADSpelling,
			"VF setting pkey=0xffff refused by VFSettingsPolicy hwnet: no rule for namespace nobody"},
		{"first refused setting named", teamA, settingsT{VLAN: ptr(100), Trust: ptr(true), MTU: ptr(1500)}, ClaimSpelling,
			"VF setting vf.trust=true refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"first rule wins over a later that allows", teamA, settingsT{MTU: ptr(1500)}, ClaimSpelling,
			"VF setting vf.mtu=1500 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a"},
		{"later rule by name", Namespace{Name: "open"}, settingsT{MTU: ptr(1500)}, ClaimSpelling, ""},
		{"selector needs every label", Namespace{Name: "x", Labels: map[string]string{"other": "x"}}, settingsT{Trust: ptr(true)}, ClaimSpelling,
			"VF setting vf.trust=true refused by VFSettingsPolicy hwnet: no rule for namespace x"},
		{"no rule: trust off and spoofchk on narrow, allowed", nobody, settingsT{Trust: ptr(false), SpoofChk: ptr(true)}, NADSpelling, ""},
		{"no rule: qos 0 alone sets VLAN 0", nobody, settingsT{VLANQoS: ptr(0)}, ClaimSpelling,
			"VF setting vf.vlanQoS=0 refused by VFSettingsPolicy hwnet: no rule for namespace nobody"},
		{"no rule: 802.1Q alone sets VLAN 0", nobody, settingsT{VLANProto: vfsettings.ProtoDot1Q}, NADSpelling,
			"VF setting vlanProto=802.1Q refused by VFSettingsPolicy hwnet: no rule for namespace nobody"},
		{"no rule: vlan", nobody, settingsT{VLAN: ptr(300)}, NADSpelling,
			"VF setting vlan=300 refused by VFSettingsPolicy hwnet: no rule for namespace nobody"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Evaluate(View{Spec: policy()}, tc.ns, tc.s, tc.sp)
			checkRefusal(t, err, tc.want)
		})
	}
}

func TestEvaluateEmptyPolicy(t *testing.T) {
	err := Evaluate(View{Spec: &Spec{Rules: []Rule{}}}, Namespace{Name: "team-a"}, settingsT{VLAN: ptr(100)}, ClaimSpelling)
	checkRefusal(t, err, "VF setting vf.vlan=100 refused by VFSettingsPolicy hwnet: no rule for namespace team-a")
}

func TestEvaluateUnknownPolicy(t *testing.T) {
	unknown := View{Unknown: "the agent has not read it yet"}
	if err := Evaluate(unknown, Namespace{Name: "team-a"}, settingsT{}, ClaimSpelling); err != nil {
		t.Fatalf("nothing asked: %v", err)
	}
	err := Evaluate(unknown, Namespace{Name: "team-a"}, settingsT{VLAN: ptr(100)}, NADSpelling)
	checkRefusal(t, err, "VF setting vlan=100 refused for namespace team-a: VFSettingsPolicy hwnet is unknown (the agent has not read it yet)")
}

func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("Evaluate: %v, want it allowed", err)
		}
		return
	}
	var r *Refusal
	if !errors.As(err, &r) {
		t.Fatalf("Evaluate: %v, want a Refusal %q", err, want)
	}
	if err.Error() != want {
		t.Fatalf("Evaluate:\n got %s\nwant %s", err, want)
	}
}

// TestSelectsByLabels: only a selector with labels makes a rule read a
// namespace's labels (an empty one matches nothing).
func TestSelectsByLabels(t *testing.T) {
	for _, tt := range []struct {
		name string
		rule Rule
		want bool
	}{
		{"listed", Rule{Name: "a", Namespaces: []string{"team-a"}}, false},
		{"empty selector", Rule{Name: "a", NamespaceSelector: &Selector{}}, false},
		{"labels", Rule{Name: "a", NamespaceSelector: &Selector{MatchLabels: map[string]string{"tenant": "b"}}}, true},
	} {
		spec := Spec{Rules: []Rule{{Name: "first", Namespaces: []string{"x"}}, tt.rule}}
		if got := spec.SelectsByLabels(); got != tt.want {
			t.Errorf("%s: SelectsByLabels = %v; want %v", tt.name, got, tt.want)
		}
	}
}
