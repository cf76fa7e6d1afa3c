package vfadmin

import (
	"encoding/json"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestFromVfInfo: what the PF reports of a VF (IFLA_VFINFO_LIST, as
// vishvananda/netlink parses it) becomes the settings a reset restores:
// the VLAN protocol from IFLA_VF_VLAN_LIST (none reported is 802.1Q), the
// link state's name, trust, the rates of IFLA_VF_RATE and the MAC, a PF
// that reports none being an unset one.
func TestFromVfInfo(t *testing.T) {
	for _, tt := range []struct {
		name string
		info netlink.VfInfo
		want string
	}{
		{"an admin's VF", netlink.VfInfo{ID: 1, Vlan: 42, Qos: 3, VlanProto: unix.ETH_P_8021AD, Spoofchk: false, Trust: 1,
			MinTxRate: 10, MaxTxRate: 500, LinkState: netlink.VF_LINK_STATE_DISABLE, Mac: net.HardwareAddr{2, 0, 0, 0, 0, 7}},
			`{"vlan":42,"vlanQoS":3,"vlanProto":"802.1ad","spoofchk":false,"trust":true,"minTxRate":10,"maxTxRate":500,"linkState":"disable","macAddress":"02:00:00:00:00:07"}`},
		{"a new VF, no VLAN list", netlink.VfInfo{Spoofchk: true, Mac: make(net.HardwareAddr, 6)},
			`{"vlan":0,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":true,"trust":false,"minTxRate":0,"maxTxRate":0,"linkState":"auto","macAddress":"00:00:00:00:00:00"}`},
		{"no MAC reported", netlink.VfInfo{VlanProto: unix.ETH_P_8021Q, LinkState: netlink.VF_LINK_STATE_ENABLE},
			`{"vlan":0,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":false,"trust":false,"minTxRate":0,"maxTxRate":0,"linkState":"enable","macAddress":"00:00:00:00:00:00"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(fromVfInfo(tt.info))
			if err != nil || string(got) != tt.want {
				t.Errorf("got  %s (%v)\nwant %s", got, err, tt.want)
			}
		})
	}
}
