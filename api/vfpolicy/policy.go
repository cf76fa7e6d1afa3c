// Package vfpolicy is the VFSettingsPolicy contract (hwnet.io/v1alpha1):
// the admin-owned, cluster-scoped object that says which VF settings the
// claims and NetworkAttachmentDefinitions of each namespace may ask for.
// It holds the typed object, its one strict decoding and validation, and
// the pure evaluation the agent runs at DRA prepare and CNI ADD. The CRD
// and the admission policies in deploy/ judge by the same rules and
// refuse with the same message (Refusal), so a user greps one string.
package vfpolicy

import (
	"bytes"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// The CRD's group, version, kind and resource, and the one object read.
const (
	Group   = "hwnet.io"
	Version = "v1alpha1"
	Kind    = "VFSettingsPolicy"
	// Name is the singleton's name: the CRD refuses any other.
	Name = "hwnet"
)

// Resource is the CRD's resource, for dynamic clients and informers.
var Resource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: "vfsettingspolicies"}

// Limits on the lists, the CRD's maxItems: a policy the API server keeps
// is small enough to evaluate on every prepare and ADD.
const (
	MaxRules       = 64
	MaxNamespaces  = 256
	MaxMatchLabels = 16
	MaxVLANRanges  = 64
	MaxPKeys       = 64
	// MaxSize bounds the spec's JSON the decoder reads.
	MaxSize = 256 << 10
	minVLAN = 1
	maxVLAN = 4094
	// maxRate is the largest rate in Mbit/s the kernel's u32 holds.
	maxRate = 1<<32 - 1
)

// Spec is the policy's spec: the rules, the first matching a namespace
// wins; none matching, the namespace may set nothing.
type Spec struct {
	Rules []Rule `json:"rules"`
}

// Rule grants the namespaces it matches the settings Allow names.
type Rule struct {
	// Name is a DNS label, unique in the policy, named in each refusal.
	Name string `json:"name"`
	// Namespaces and NamespaceSelector: a namespace matches if it is
	// listed or its labels match; a rule with neither matches nothing.
	Namespaces        []string  `json:"namespaces,omitempty"`
	NamespaceSelector *Selector `json:"namespaceSelector,omitempty"`
	Allow             Allow     `json:"allow"`
}

// Selector is a label selector with matchLabels only.
type Selector struct {
	MatchLabels map[string]string `json:"matchLabels,omitempty"`
}

// Allow is what a rule's namespaces may set; the zero Allow is nothing.
type Allow struct {
	// VLANs are the VLAN IDs allowed; none: no VLAN setting at all
	// (VLAN 0, untagged, included).
	VLANs []VLANRange `json:"vlans,omitempty"`
	// VLANQoS allows a non-zero VLAN QoS; VLANProto8021ad the 802.1ad
	// protocol.
	VLANQoS         bool `json:"vlanQoS,omitempty"`
	VLANProto8021ad bool `json:"vlanProto8021ad,omitempty"`
	// MaxTxRateMbps is the ceiling of both rates (Mbit/s); nil allows no
	// rate setting. A max rate of 0 (unlimited) lifts it and is refused.
	MaxTxRateMbps *uint64 `json:"maxTxRateMbps,omitempty"`
	// Trust allows turning trust on, SpoofchkOff turning spoof checking
	// off: the other way is always allowed under a rule.
	Trust       bool `json:"trust,omitempty"`
	SpoofchkOff bool `json:"spoofchkOff,omitempty"`
	MACAddress  bool `json:"macAddress,omitempty"`
	LinkState   bool `json:"linkState,omitempty"`
	MTU         bool `json:"mtu,omitempty"`
	// PKeys are the InfiniBand partition keys allowed, each as a VF's
	// pKey is written ("0x8001"); none: no partition key at all. The
	// membership bit is part of the key: 0x0001 allows limited
	// membership of the partition 0x8001 gives in full.
	PKeys []string `json:"pKeys,omitempty"`
}

// VLANRange is the VLAN IDs Min to Max, both included.
type VLANRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Contains says whether vlan is in the range.
func (r VLANRange) Contains(vlan int) bool { return vlan >= r.Min && vlan <= r.Max }

// DecodeSpec reads a policy's spec strictly (an unknown key, a
// matchExpressions among them, is an error) and validates it.
func DecodeSpec(raw []byte) (Spec, error) {
	if len(raw) > MaxSize {
		return Spec{}, fmt.Errorf("VFSettingsPolicy %s: spec of %d bytes, more than %d", Name, len(raw), MaxSize)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Spec{}, fmt.Errorf("VFSettingsPolicy %s: spec: %w", Name, err)
	}
	if dec.More() {
		return Spec{}, fmt.Errorf("VFSettingsPolicy %s: spec: data after the object", Name)
	}
	if err := s.Validate(); err != nil {
		return Spec{}, err
	}
	return s, nil
}

// Validate checks the spec as the CRD's schema does; its errors name the
// field and the value.
func (s Spec) Validate() error {
	if len(s.Rules) > MaxRules {
		return fmt.Errorf("VFSettingsPolicy %s: spec.rules: %d rules, want at most %d", Name, len(s.Rules), MaxRules)
	}
	seen := make(map[string]int, len(s.Rules))
	for i, r := range s.Rules {
		field := fmt.Sprintf("spec.rules[%d]", i)
		if err := r.validate(field); err != nil {
			return fmt.Errorf("VFSettingsPolicy %s: %w", Name, err)
		}
		if j, dup := seen[r.Name]; dup {
			return fmt.Errorf("VFSettingsPolicy %s: %s.name %q: rule %d has it already", Name, field, r.Name, j)
		}
		seen[r.Name] = i
	}
	return nil
}

func (r Rule) validate(field string) error {
	if msgs := validation.IsDNS1123Label(r.Name); len(msgs) > 0 {
		return fmt.Errorf("%s.name %q: %s", field, r.Name, msgs[0])
	}
	if len(r.Namespaces) > MaxNamespaces {
		return fmt.Errorf("%s.namespaces: %d names, want at most %d", field, len(r.Namespaces), MaxNamespaces)
	}
	for j, ns := range r.Namespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			return fmt.Errorf("%s.namespaces[%d] %q: %s", field, j, ns, msgs[0])
		}
	}
	if err := r.NamespaceSelector.validate(field + ".namespaceSelector"); err != nil {
		return err
	}
	return r.Allow.validate(field + ".allow")
}

func (s *Selector) validate(field string) error {
	if s == nil {
		return nil
	}
	if len(s.MatchLabels) > MaxMatchLabels {
		return fmt.Errorf("%s.matchLabels: %d labels, want at most %d", field, len(s.MatchLabels), MaxMatchLabels)
	}
	for k, v := range s.MatchLabels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return fmt.Errorf("%s.matchLabels key %q: %s", field, k, msgs[0])
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return fmt.Errorf("%s.matchLabels[%q] %q: %s", field, k, v, msgs[0])
		}
	}
	return nil
}

func (a Allow) validate(field string) error {
	if len(a.VLANs) > MaxVLANRanges {
		return fmt.Errorf("%s.vlans: %d ranges, want at most %d", field, len(a.VLANs), MaxVLANRanges)
	}
	for j, r := range a.VLANs {
		f := fmt.Sprintf("%s.vlans[%d]", field, j)
		switch {
		case r.Min < minVLAN || r.Min > maxVLAN:
			return fmt.Errorf("%s.min %d: want %d to %d", f, r.Min, minVLAN, maxVLAN)
		case r.Max < minVLAN || r.Max > maxVLAN:
			return fmt.Errorf("%s.max %d: want %d to %d", f, r.Max, minVLAN, maxVLAN)
		case r.Min > r.Max:
			return fmt.Errorf("%s: min %d is more than max %d", f, r.Min, r.Max)
		}
	}
	if err := validatePKeys(field, a.PKeys); err != nil {
		return err
	}
	if a.MaxTxRateMbps != nil && *a.MaxTxRateMbps > maxRate {
		return fmt.Errorf("%s.maxTxRateMbps %d: want at most %d", field, *a.MaxTxRateMbps, uint64(maxRate))
	}
	return nil
}

// validatePKeys checks each key as a VF's pKey is checked, and that it is
// written as the kernel writes it, the one spelling the admission
// policies compare.
func validatePKeys(field string, keys []string) error {
	if len(keys) > MaxPKeys {
		return fmt.Errorf("%s.pKeys: %d keys, want at most %d", field, len(keys), MaxPKeys)
	}
	for j, k := range keys {
		v, err := vfsettings.ParsePKey(k)
		if err == nil && vfsettings.FormatPKey(v) != k {
			err = fmt.Errorf("want it as %s", vfsettings.FormatPKey(v))
		}
		if err != nil {
			return fmt.Errorf("%s.pKeys[%d] %q: %w", field, j, k, err)
		}
	}
	return nil
}
