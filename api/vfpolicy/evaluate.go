package vfpolicy

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// Namespace is what a rule matches: the namespace's name and labels.
type Namespace struct {
	Name   string
	Labels map[string]string
}

// View is the policy as its reader knows it: Spec nil means unknown, for
// the reason Unknown gives (not read yet, absent, invalid), and refuses
// every setting: the policy fails closed.
type View struct {
	Spec    *Spec
	Unknown string
}

// Spelling is how an object names the settings: the knob's name in a
// refusal is the object's own.
type Spelling struct {
	// Prefix goes before each name ("vf." for a claim's NetworkConfig).
	Prefix string
	// Names are the names that differ from a claim's (vfsettings.Names).
	Names vfsettings.Names
	// OnOff spells booleans "on" and "off", as sriov-cni does.
	OnOff bool
}

// The spellings of the two objects the policy judges.
var (
	// ClaimSpelling: a ResourceClaim's or template's NetworkConfig "vf".
	ClaimSpelling = Spelling{Prefix: "vf."}
	// NADSpelling: a NetworkAttachmentDefinition's sriov-cni keys.
	NADSpelling = Spelling{Names: vfsettings.SRIOVCNINames, OnOff: true}
)

func (sp Spelling) knob(claimName string) string {
	if name, ok := sp.Names[claimName]; ok {
		return sp.Prefix + name
	}
	return sp.Prefix + claimName
}

func (sp Spelling) boolean(v bool) string {
	switch {
	case !sp.OnOff:
		return strconv.FormatBool(v)
	case v:
		return "on"
	}
	return "off"
}

// Refusal is a setting the policy refuses. Its message is the contract's,
// the same the admission policies give.
type Refusal struct {
	Knob, Value, Namespace string
	// Rule is the rule that matched the namespace, "" for none.
	Rule string
	// Unknown, when not "", says why the policy is unknown.
	Unknown string
}

func (r *Refusal) Error() string {
	switch {
	case r.Unknown != "":
		return fmt.Sprintf("VF setting %s=%s refused for namespace %s: VFSettingsPolicy %s is unknown (%s)", r.Knob, r.Value, r.Namespace, Name, r.Unknown)
	case r.Rule == "":
		return fmt.Sprintf("VF setting %s=%s refused by VFSettingsPolicy %s: no rule for namespace %s", r.Knob, r.Value, Name, r.Namespace)
	}
	return fmt.Sprintf("VF setting %s=%s refused by VFSettingsPolicy %s rule %s for namespace %s", r.Knob, r.Value, Name, r.Rule, r.Namespace)
}

// Evaluate judges the settings an object of namespace ns asks for, spelled
// as sp: nil when the first rule matching ns allows every one (with no
// rule, an empty Allow), else the Refusal of the first setting it does not
// (settings in the order of vfsettings.Settings). No setting asked is
// always allowed.
func Evaluate(v View, ns Namespace, s vfsettings.Settings, sp Spelling) error {
	asked := sp.settings(s)
	if len(asked) == 0 {
		return nil
	}
	if v.Spec == nil {
		return &Refusal{Knob: asked[0].knob, Value: asked[0].value, Namespace: ns.Name, Unknown: v.Unknown}
	}
	// No rule grants nothing: what only narrows the VF (trust off, spoof
	// check on) is still allowed, as the admission policies allow it.
	var allow Allow
	var ruleName string
	if rule := v.Spec.Match(ns); rule != nil {
		allow, ruleName = rule.Allow, rule.Name
	}
	for _, st := range asked {
		if !st.allowed(allow) {
			return &Refusal{Knob: st.knob, Value: st.value, Namespace: ns.Name, Rule: ruleName}
		}
	}
	return nil
}

// Match is the first rule matching ns, nil for none.
func (s *Spec) Match(ns Namespace) *Rule {
	for i := range s.Rules {
		if s.Rules[i].Matches(ns) {
			return &s.Rules[i]
		}
	}
	return nil
}

// SelectsByLabels says whether a rule matches namespaces by their labels:
// only then does judging need them.
func (s *Spec) SelectsByLabels() bool {
	return slices.ContainsFunc(s.Rules, func(r Rule) bool {
		return r.NamespaceSelector != nil && len(r.NamespaceSelector.MatchLabels) > 0
	})
}

// Matches says whether ns is listed in the rule or its labels match the
// rule's selector; an empty selector matches nothing, as a rule without
// namespaces or selector does.
func (r *Rule) Matches(ns Namespace) bool {
	if slices.Contains(r.Namespaces, ns.Name) {
		return true
	}
	if r.NamespaceSelector == nil || len(r.NamespaceSelector.MatchLabels) == 0 {
		return false
	}
	for k, want := range r.NamespaceSelector.MatchLabels {
		if got, ok := ns.Labels[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// allowsVLAN says whether vlan is in one of the ranges.
func (a Allow) allowsVLAN(vlan int) bool {
	return slices.ContainsFunc(a.VLANs, func(r VLANRange) bool { return r.Contains(vlan) })
}

// allowsRate says whether a rate is under the ceiling; a max rate of 0,
// unlimited, is above any.
func (a Allow) allowsRate(rate uint64, isMax bool) bool {
	if a.MaxTxRateMbps == nil || (isMax && rate == 0) {
		return false
	}
	return rate <= *a.MaxTxRateMbps
}

// setting is one setting asked for, and whether an Allow grants it.
type setting struct {
	knob, value string
	allowed     func(Allow) bool
}

// settings lists the settings s asks for, in the order of its fields.
func (sp Spelling) settings(s vfsettings.Settings) []setting {
	out := sp.vlanSettings(s)
	add := func(name, value string, allowed func(Allow) bool) {
		out = append(out, setting{knob: sp.knob(name), value: value, allowed: allowed})
	}
	if s.SpoofChk != nil {
		on := *s.SpoofChk
		add("spoofchk", sp.boolean(on), func(a Allow) bool { return on || a.SpoofchkOff })
	}
	if s.Trust != nil {
		on := *s.Trust
		add("trust", sp.boolean(on), func(a Allow) bool { return !on || a.Trust })
	}
	if s.MinTxRate != nil {
		r := *s.MinTxRate
		add("minTxRate", strconv.FormatUint(r, 10), func(a Allow) bool { return a.allowsRate(r, false) })
	}
	if s.MaxTxRate != nil {
		r := *s.MaxTxRate
		add("maxTxRate", strconv.FormatUint(r, 10), func(a Allow) bool { return a.allowsRate(r, true) })
	}
	if s.LinkState != "" {
		add("linkState", s.LinkState, func(a Allow) bool { return a.LinkState })
	}
	if s.MTU != nil {
		add("mtu", strconv.Itoa(*s.MTU), func(a Allow) bool { return a.MTU })
	}
	if s.MAC != "" {
		add("macAddress", s.MAC, func(a Allow) bool { return a.MACAddress })
	}
	if s.PKey != "" {
		k := s.PKey
		add("pKey", k, func(a Allow) bool { return slices.Contains(a.PKeys, k) })
	}
	return out
}

// vlanSettings lists the VLAN settings s asks for. A QoS or protocol
// without a VLAN sets VLAN 0 (untagged), a VLAN setting no range allows.
func (sp Spelling) vlanSettings(s vfsettings.Settings) []setting {
	var out []setting
	vlan := 0
	if s.VLAN != nil {
		vlan = *s.VLAN
		out = append(out, setting{knob: sp.knob("vlan"), value: strconv.Itoa(vlan), allowed: func(a Allow) bool { return a.allowsVLAN(vlan) }})
	}
	if s.VLANQoS != nil {
		q := *s.VLANQoS
		out = append(out, setting{knob: sp.knob("vlanQoS"), value: strconv.Itoa(q),
			allowed: func(a Allow) bool { return a.allowsVLAN(vlan) && (q == 0 || a.VLANQoS) }})
	}
	if s.VLANProto != "" {
		p := s.VLANProto
		out = append(out, setting{knob: sp.knob("vlanProto"), value: p,
			allowed: func(a Allow) bool { return a.allowsVLAN(vlan) && (p != vfsettings.ProtoDot1AD || a.VLANProto8021ad) }})
	}
	return out
}

// Checker judges the settings an object of namespace asks for, spelled as
// sp: nil, or the Refusal to give its user (cni/vfpolicywatch's Watcher,
// which evaluates the policy the agent last read).
type Checker interface {
	Check(namespace string, s vfsettings.Settings, sp Spelling) error
}
