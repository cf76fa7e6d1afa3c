package netconf

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// SRIOVCNIType is sriov-cni's plugin type, which sets and resets the VF
// settings of its own configuration.
const SRIOVCNIType = "sriov"

// IBSRIOVCNIType is ib-sriov-cni's plugin type: its "pkey" goes to the
// subnet manager (ib-kubernetes), not through the PF.
const IBSRIOVCNIType = "ib-sriov"

// VFSettings are the VF settings the list's first plugin, the one that
// takes the device, gives in sriov-cni's keys and types ("vlan",
// "vlanQoS", "vlanProto", "spoofchk" and "trust" as "on"/"off",
// "min_tx_rate", "max_tx_rate", "link_state", "mac", "mtu") and
// ib-sriov-cni's "pkey", for hwnet to
// set through the PF: a NetworkAttachmentDefinition written for sriov-cni
// keeps its settings with another interface plugin (host-device). When
// the first plugin is sriov-cni or ib-sriov-cni itself, it sets them,
// and hwnet none.
func (d *Delegate) VFSettings() (vfsettings.Settings, error) {
	if len(d.Plugins) == 0 || d.Plugins[0].Type == SRIOVCNIType || d.Plugins[0].Type == IBSRIOVCNIType {
		return vfsettings.Settings{}, nil
	}
	return d.VFKeys()
}

// VFKeys are the sriov-cni keys of the list's first plugin, whichever
// plugin it is: what the network asks of its VF, whether hwnet sets it
// (VFSettings) or sriov-cni itself does, and what the VFSettingsPolicy
// judges.
func (d *Delegate) VFKeys() (vfsettings.Settings, error) {
	var s vfsettings.Settings
	if len(d.Plugins) == 0 {
		return s, nil
	}
	f := d.Plugins[0].Fields
	const path = "plugins[0]."
	var err error
	decode := func(key, want string, v any) {
		var name string
		if err == nil {
			name, err = sriovField(f, path, key)
		}
		if err == nil && name != "" {
			err = decodeField(f, path, name, want, v)
		}
	}
	decode("vlan", "an integer", &s.VLAN)
	decode("vlanQoS", "an integer", &s.VLANQoS)
	decode("vlanProto", "a string", &s.VLANProto)
	decode("min_tx_rate", "a non-negative integer (Mbit/s)", &s.MinTxRate)
	decode("max_tx_rate", "a non-negative integer (Mbit/s)", &s.MaxTxRate)
	decode("link_state", "a string", &s.LinkState)
	decode("mac", "a string", &s.MAC)
	decode("mtu", "an integer", &s.MTU)
	decode("pkey", "a string such as \"0x8001\"", &s.PKey)
	if err == nil {
		s.SpoofChk, err = onOff(f, path, "spoofchk")
	}
	if err == nil {
		s.Trust, err = onOff(f, path, "trust")
	}
	if err == nil {
		err = s.ValidateAs(path[:len(path)-1], vfsettings.SRIOVCNINames)
	}
	if err != nil {
		return vfsettings.Settings{}, withSource(d.Source, err)
	}
	return s, nil
}

// sriovField is the member of f that sriov-cni reads as key, "" for
// none: Go's JSON decoding matches a field's name in any case, so sriov-cni
// takes "VLAN" for its "vlan", and a policy reading only "vlan" would let
// it by. Of two members it would read as key it takes the last, which a
// map cannot tell: refused.
func sriovField(f map[string]json.RawMessage, path, key string) (string, error) {
	var names []string
	for k := range f {
		if strings.EqualFold(k, key) {
			names = append(names, k)
		}
	}
	switch len(names) {
	case 0:
		return "", nil
	case 1:
		return names[0], nil
	}
	slices.Sort(names)
	return "", fmt.Errorf("%s: %q are all sriov-cni's %q, which takes the last: keep one", strings.TrimSuffix(path, "."), names, key)
}

// onOff reads sriov-cni's "on"/"off" string key; nil when absent.
func onOff(f map[string]json.RawMessage, path, key string) (*bool, error) {
	name, err := sriovField(f, path, key)
	if err != nil || name == "" {
		return nil, err
	}
	var v string
	if err := decodeField(f, path, name, `"on" or "off"`, &v); err != nil {
		return nil, err
	}
	switch v {
	case "":
		return nil, nil
	case "on", "off":
		on := v == "on"
		return &on, nil
	}
	return nil, fmt.Errorf("%s%s: want \"on\" or \"off\", got %q", path, name, v)
}
