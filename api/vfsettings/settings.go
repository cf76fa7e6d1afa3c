// Package vfsettings is the contract for a VF's settings that hwnet sets
// through its PF when a device is handed to a pod (VLAN, QoS, spoof
// check, trust, rate limits, link state, MTU, MAC) and resets when the
// pod goes (and an InfiniBand VF's partition key): one typed struct and its one validation, whether the
// settings came from a claim's NetworkConfig ("vf", parsed here) or from
// a NetworkAttachmentDefinition's sriov-cni keys (parsed by cni/netconf),
// and the record of what was set, kept on disk before it is set so that a
// teardown after a crash still resets it.
package vfsettings

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
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
	// PKey is an InfiniBand VF's partition key, "0x8001" (the top bit
	// full membership), normalized to 0x and four lower-case digits.
	PKey string `json:"pKey,omitempty"`
}

// IsZero says whether the settings ask for nothing.
func (s Settings) IsZero() bool { return s == Settings{} }

// SetsVLAN says whether the settings touch the VF's VLAN.
func (s Settings) SetsVLAN() bool { return s.VLAN != nil || s.VLANQoS != nil || s.VLANProto != "" }

// OnlyPKey says whether the settings ask for a partition key and nothing
// else: nothing a PF sets through netlink.
func (s Settings) OnlyPKey() bool { return s.PKey != "" && s == Settings{PKey: s.PKey} }

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

// Names are the field names of a format that names some differently
// from a claim configuration, by the claim's name.
type Names map[string]string

// SRIOVCNINames are sriov-cni's names, which a NetworkAttachmentDefinition
// uses; "pkey" is ib-sriov-cni's.
var SRIOVCNINames = Names{"minTxRate": "min_tx_rate", "maxTxRate": "max_tx_rate", "linkState": "link_state", "macAddress": "mac", "pKey": "pkey"}

// Quote is the field's name in the format, quoted: claimName where the
// format names it as a claim does (nil Names is a claim's).
func (n Names) Quote(claimName string) string {
	if name, ok := n[claimName]; ok {
		return strconv.Quote(name)
	}
	return strconv.Quote(claimName)
}

// Validate checks every value against what the kernel takes; its errors
// name the field (a claim configuration's name) and the value. It
// normalizes VLANProto's case and MAC's form.
func (s *Settings) Validate(source string) error { return s.ValidateAs(source, nil) }

// ValidateAs is Validate with errors naming the fields by names.
func (s *Settings) ValidateAs(source string, names Names) error {
	checks := []func(Names) error{s.checkVLAN, s.checkRates, s.checkLinkState, s.checkMTU, s.checkMAC, s.checkPKey}
	for _, check := range checks {
		if err := check(names); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
	}
	return nil
}

func (s *Settings) checkVLAN(n Names) error {
	if s.VLAN != nil && (*s.VLAN < 0 || *s.VLAN > maxVLAN) {
		return fmt.Errorf("%s %d: want 0 to %d", n.Quote("vlan"), *s.VLAN, maxVLAN)
	}
	if s.VLANQoS != nil && (*s.VLANQoS < 0 || *s.VLANQoS > maxQoS) {
		return fmt.Errorf("%s %d: want 0 to %d", n.Quote("vlanQoS"), *s.VLANQoS, maxQoS)
	}
	switch {
	case s.VLANProto == "":
	case strings.EqualFold(s.VLANProto, ProtoDot1Q):
		s.VLANProto = ProtoDot1Q
	case strings.EqualFold(s.VLANProto, ProtoDot1AD):
		s.VLANProto = ProtoDot1AD
	default:
		return fmt.Errorf("%s %q: want %q or %q", n.Quote("vlanProto"), s.VLANProto, ProtoDot1Q, ProtoDot1AD)
	}
	noVLAN := s.VLAN == nil || *s.VLAN == 0
	if noVLAN && s.VLANQoS != nil && *s.VLANQoS != 0 {
		return fmt.Errorf("%s %d: needs a non-zero %s", n.Quote("vlanQoS"), *s.VLANQoS, n.Quote("vlan"))
	}
	if noVLAN && s.VLANProto == ProtoDot1AD {
		return fmt.Errorf("%s %q: needs a non-zero %s", n.Quote("vlanProto"), s.VLANProto, n.Quote("vlan"))
	}
	return nil
}

func (s *Settings) checkRates(n Names) error {
	for _, r := range []struct {
		name string
		v    *uint64
	}{{"minTxRate", s.MinTxRate}, {"maxTxRate", s.MaxTxRate}} {
		if r.v != nil && *r.v > maxRate {
			return fmt.Errorf("%s %d: want at most %d (Mbit/s)", n.Quote(r.name), *r.v, uint64(maxRate))
		}
	}
	if s.MinTxRate != nil && s.MaxTxRate != nil && *s.MaxTxRate != 0 && *s.MinTxRate > *s.MaxTxRate {
		return fmt.Errorf("%s %d: more than %s %d", n.Quote("minTxRate"), *s.MinTxRate, n.Quote("maxTxRate"), *s.MaxTxRate)
	}
	return nil
}

func (s *Settings) checkLinkState(n Names) error {
	switch s.LinkState {
	case "", LinkAuto, LinkEnable, LinkDisable:
		return nil
	}
	return fmt.Errorf("%s %q: want %q, %q or %q", n.Quote("linkState"), s.LinkState, LinkAuto, LinkEnable, LinkDisable)
}

func (s *Settings) checkMTU(n Names) error {
	if s.MTU != nil && (*s.MTU < minMTU || *s.MTU > maxMTU) {
		return fmt.Errorf("%s %d: want %d to %d", n.Quote("mtu"), *s.MTU, minMTU, maxMTU)
	}
	return nil
}

func (s *Settings) checkMAC(n Names) error {
	if s.MAC == "" {
		return nil
	}
	hw, err := net.ParseMAC(s.MAC)
	switch {
	case err != nil || len(hw) != 6:
		return fmt.Errorf("%s %q: want a 6-byte MAC address such as 02:00:00:00:00:01", n.Quote("macAddress"), s.MAC)
	case hw[0]&1 == 1:
		return fmt.Errorf("%s %q: a multicast address cannot be a VF's", n.Quote("macAddress"), s.MAC)
	case bytes.Equal(hw, make(net.HardwareAddr, 6)):
		return fmt.Errorf("%s %q: the zero address cannot be a VF's", n.Quote("macAddress"), s.MAC)
	}
	s.MAC = hw.String()
	return nil
}

func (s *Settings) checkPKey(n Names) error {
	if s.PKey == "" {
		return nil
	}
	k, err := ParsePKey(s.PKey)
	if err != nil {
		return fmt.Errorf("%s %q: %w", n.Quote("pKey"), s.PKey, err)
	}
	s.PKey = FormatPKey(k)
	return nil
}

// pKeyBase is a partition key without its membership bit.
const pKeyBase = 0x7fff

// ParsePKey reads a partition key as ib-sriov-cni's "pkey" is written:
// 0x and one to four hex digits, nothing around them. The membership bit
// (0x8000) may be set; a key whose other 15 bits are zero (0x0000,
// 0x8000) is the invalid partition key, which no port may be given.
func ParsePKey(s string) (uint16, error) {
	digits, ok := strings.CutPrefix(strings.ToLower(s), "0x")
	if !ok || len(digits) == 0 || len(digits) > 4 || strings.Trim(digits, "0123456789abcdef") != "" {
		return 0, errors.New("want 0x and up to four hex digits, such as 0x8001")
	}
	v, err := strconv.ParseUint(digits, 16, 16)
	if err != nil {
		return 0, err
	}
	if v&pKeyBase == 0 {
		return 0, errors.New("the invalid partition key: its low 15 bits must not all be zero")
	}
	return uint16(v), nil
}

// FormatPKey writes a partition key as the kernel's P_Key tables do.
func FormatPKey(k uint16) string { return fmt.Sprintf("0x%04x", k) }
