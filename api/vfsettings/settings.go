// Package vfsettings is the contract for a VF's settings that hwnet sets
// through its PF when a device is handed to a pod (VLAN, QoS, spoof
// check, trust, rate limits, link state, MTU, MAC) and resets when the
// pod goes: one typed struct and its one validation, whether the
// settings came from a claim's NetworkConfig ("vf", parsed here) or from
// a NetworkAttachmentDefinition's sriov-cni keys (parsed by cni/netconf),
// and the record of what was set, kept on disk before it is set so that a
// teardown after a crash still resets it.
package vfsettings

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// MaxSize is the largest "vf" object a claim configuration may hold: ten
// keys with their values fit in a tenth of it.
const MaxSize = 1024

// VLAN protocols (the kernel's IFLA_VF_VLAN_LIST protocol).
const (
	ProtoDot1Q  = "802.1Q"
	ProtoDot1AD = "802.1ad"
)

// Link states of a VF as its PF reports it (IFLA_VF_LINK_STATE).
const (
	LinkAuto    = "auto"
	LinkEnable  = "enable"
	LinkDisable = "disable"
)

// Limits the kernel and 802.1Q put on the values.
const (
	maxVLAN = 4095
	maxQoS  = 7
	// maxRate is the largest rate in Mbit/s the kernel's u32 holds.
	maxRate = 1<<32 - 1
	minMTU  = 68
	maxMTU  = 65535
)

// Settings are the VF settings asked for; a nil or empty field is left
// as it is. JSON names are a claim configuration's; a
// NetworkAttachmentDefinition names them as sriov-cni does.
type Settings struct {
	VLAN      *int    `json:"vlan,omitempty"`
	VLANQoS   *int    `json:"vlanQoS,omitempty"`
	VLANProto string  `json:"vlanProto,omitempty"`
	SpoofChk  *bool   `json:"spoofchk,omitempty"`
	Trust     *bool   `json:"trust,omitempty"`
	MinTxRate *uint64 `json:"minTxRate,omitempty"`
	MaxTxRate *uint64 `json:"maxTxRate,omitempty"`
	LinkState string  `json:"linkState,omitempty"`
	MTU       *int    `json:"mtu,omitempty"`
	MAC       string  `json:"macAddress,omitempty"`
}

// IsZero says whether the settings ask for nothing.
func (s Settings) IsZero() bool { return s == Settings{} }

// SetsVLAN says whether the settings touch the VF's VLAN.
func (s Settings) SetsVLAN() bool { return s.VLAN != nil || s.VLANQoS != nil || s.VLANProto != "" }

// SetsRate says whether the settings touch the VF's rate limits.
func (s Settings) SetsRate() bool { return s.MinTxRate != nil || s.MaxTxRate != nil }

// Parse reads a claim configuration's "vf" object strictly and
// validates it; source names it in errors.
func Parse(raw json.RawMessage, source string) (Settings, error) {
	if len(raw) > MaxSize {
		return Settings{}, fmt.Errorf("%s: %d bytes, more than the %d a VF's settings may take", source, len(raw), MaxSize)
	}
	var s Settings
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Settings{}, fmt.Errorf("%s: %w", source, err)
	}
	if err := s.Validate(source); err != nil {
		return Settings{}, err
	}
	return s, nil
}

// Validate checks every value against what the kernel takes; its errors
// name the field (a claim configuration's name) and the value. It
// normalizes VLANProto's case and MAC's form.
func (s *Settings) Validate(source string) error {
	checks := []func() error{s.checkVLAN, s.checkRates, s.checkLinkState, s.checkMTU, s.checkMAC}
	for _, check := range checks {
		if err := check(); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
	}
	return nil
}

func (s *Settings) checkVLAN() error {
	if s.VLAN != nil && (*s.VLAN < 0 || *s.VLAN > maxVLAN) {
		return fmt.Errorf("\"vlan\" %d: want 0 to %d", *s.VLAN, maxVLAN)
	}
	if s.VLANQoS != nil && (*s.VLANQoS < 0 || *s.VLANQoS > maxQoS) {
		return fmt.Errorf("\"vlanQoS\" %d: want 0 to %d", *s.VLANQoS, maxQoS)
	}
	switch {
	case s.VLANProto == "":
	case strings.EqualFold(s.VLANProto, ProtoDot1Q):
		s.VLANProto = ProtoDot1Q
	case strings.EqualFold(s.VLANProto, ProtoDot1AD):
		s.VLANProto = ProtoDot1AD
	default:
		return fmt.Errorf("\"vlanProto\" %q: want %q or %q", s.VLANProto, ProtoDot1Q, ProtoDot1AD)
	}
	noVLAN := s.VLAN == nil || *s.VLAN == 0
	if noVLAN && s.VLANQoS != nil && *s.VLANQoS != 0 {
		return fmt.Errorf("\"vlanQoS\" %d: needs a non-zero \"vlan\"", *s.VLANQoS)
	}
	if noVLAN && s.VLANProto == ProtoDot1AD {
		return fmt.Errorf("\"vlanProto\" %q: needs a non-zero \"vlan\"", s.VLANProto)
	}
	return nil
}

func (s *Settings) checkRates() error {
	for _, r := range []struct {
		name string
		v    *uint64
	}{{"minTxRate", s.MinTxRate}, {"maxTxRate", s.MaxTxRate}} {
		if r.v != nil && *r.v > maxRate {
			return fmt.Errorf("%q %d: want at most %d (Mbit/s)", r.name, *r.v, uint64(maxRate))
		}
	}
	if s.MinTxRate != nil && s.MaxTxRate != nil && *s.MaxTxRate != 0 && *s.MinTxRate > *s.MaxTxRate {
		return fmt.Errorf("\"minTxRate\" %d: more than \"maxTxRate\" %d", *s.MinTxRate, *s.MaxTxRate)
	}
	return nil
}

func (s *Settings) checkLinkState() error {
	switch s.LinkState {
	case "", LinkAuto, LinkEnable, LinkDisable:
		return nil
	}
	return fmt.Errorf("\"linkState\" %q: want %q, %q or %q", s.LinkState, LinkAuto, LinkEnable, LinkDisable)
}

func (s *Settings) checkMTU() error {
	if s.MTU != nil && (*s.MTU < minMTU || *s.MTU > maxMTU) {
		return fmt.Errorf("\"mtu\" %d: want %d to %d", *s.MTU, minMTU, maxMTU)
	}
	return nil
}

func (s *Settings) checkMAC() error {
	if s.MAC == "" {
		return nil
	}
	hw, err := net.ParseMAC(s.MAC)
	switch {
	case err != nil || len(hw) != 6:
		return fmt.Errorf("\"macAddress\" %q: want a 6-byte MAC address such as 02:00:00:00:00:01", s.MAC)
	case hw[0]&1 == 1:
		return fmt.Errorf("\"macAddress\" %q: a multicast address cannot be a VF's", s.MAC)
	case bytes.Equal(hw, make(net.HardwareAddr, 6)):
		return fmt.Errorf("\"macAddress\" %q: the zero address cannot be a VF's", s.MAC)
	}
	s.MAC = hw.String()
	return nil
}
