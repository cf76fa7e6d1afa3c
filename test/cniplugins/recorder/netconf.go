package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// Personalities the recorder can answer as.
const (
	personalityPlain   = "plain"
	personalitySRIOV   = "sriov"
	personalityIBSRIOV = "ib-sriov"
)

// commands lists the CNI commands "failOn" may name.
var commands = []string{"ADD", "DEL", "CHECK", "STATUS", "GC"}

// pciAddress matches a full PCI address as sriov-cni accepts it in "deviceID".
var pciAddress = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$`)

// netConf is the recorder's network configuration: the CNI fields plus the
// keys that select its personality and what it leaves behind.
type netConf struct {
	types.PluginConf

	Personality string   `json:"personality,omitempty"`
	DeviceID    string   `json:"deviceID,omitempty"`
	RecordFile  string   `json:"recordFile,omitempty"`
	StateDir    string   `json:"stateDir,omitempty"`
	FailOn      []string `json:"failOn,omitempty"`
	// HangOn names commands the plugin never answers, as a plugin stuck
	// on a dead device or API does; its caller's timeout must end it.
	HangOn []string `json:"hangOn,omitempty"`
	// WaitFor makes ADD answer only once the file it names exists, as a
	// slow plugin does; the test ends the wait by creating the file.
	WaitFor       string        `json:"waitFor,omitempty"`
	RuntimeConfig runtimeConfig `json:"runtimeConfig,omitempty"`
}

// runtimeConfig holds the capability arguments the runtime injects.
type runtimeConfig struct {
	MAC            string `json:"mac,omitempty"`
	InfinibandGUID string `json:"infinibandGUID,omitempty"`
}

// decodeNetConf decodes stdin without judging it, so that even a
// configuration the recorder rejects is recorded first.
func decodeNetConf(stdin []byte) (*netConf, error) {
	conf := &netConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, fmt.Errorf("parse netconf: %w", err)
	}
	if conf.Personality == "" {
		conf.Personality = personalityPlain
	}
	if conf.CNIVersion == "" {
		conf.CNIVersion = "0.1.0" // what the CNI spec assumes when none is given
	}
	return conf, nil
}

// validate checks what every command needs; checks that only ADD needs
// (deviceID) live in requireDevice.
func (c *netConf) validate() error {
	switch c.Personality {
	case personalityPlain, personalitySRIOV, personalityIBSRIOV:
	default:
		return fmt.Errorf("netconf \"personality\" is %q: want %q, %q or %q",
			c.Personality, personalitySRIOV, personalityIBSRIOV, personalityPlain)
	}
	for field, cmds := range map[string][]string{"failOn": c.FailOn, "hangOn": c.HangOn} {
		for _, cmd := range cmds {
			if !slices.Contains(commands, cmd) {
				return fmt.Errorf("netconf %q names %q: want some of %v", field, cmd, commands)
			}
		}
	}
	if err := version.ParsePrevResult(&c.PluginConf); err != nil {
		return fmt.Errorf("netconf \"prevResult\": %w", err)
	}
	return nil
}

// hasDevice reports whether the personality stands for a VF plugin that
// puts a device of its own into the sandbox.
func (c *netConf) hasDevice() bool {
	return c.Personality != personalityPlain
}

// requireDevice fails as sriov-cni and ib-sriov-cni do when the delegating
// plugin did not inject the allocated VF's PCI address.
func (c *netConf) requireDevice() error {
	if !c.hasDevice() {
		return nil
	}
	if c.DeviceID == "" {
		return fmt.Errorf("LoadConf(): VF pci addr is required (netconf %q has no \"deviceID\")", c.Name)
	}
	if !pciAddress.MatchString(c.DeviceID) {
		return fmt.Errorf("LoadConf(): netconf \"deviceID\" is %q: want a PCI address like 0000:3b:02.0", c.DeviceID)
	}
	return nil
}

// hardwareAddr is the address the personality gives the sandbox interface:
// runtimeConfig's when set, else one derived from deviceID so that repeated
// calls (ADD, then CHECK) agree.
func (c *netConf) hardwareAddr() (net.HardwareAddr, error) {
	seed := sha256.Sum256([]byte(c.DeviceID))
	if c.Personality == personalityIBSRIOV {
		return c.ipoibAddr(seed)
	}
	if c.RuntimeConfig.MAC == "" {
		mac := net.HardwareAddr(seed[:6])
		mac[0] = mac[0]&^0x01 | 0x02 // unicast, locally administered
		return mac, nil
	}
	mac, err := net.ParseMAC(c.RuntimeConfig.MAC)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("runtimeConfig \"mac\" is %q: want a 6-byte Ethernet MAC", c.RuntimeConfig.MAC)
	}
	return mac, nil
}

// ipoibAddr builds the 20-byte IP-over-InfiniBand hardware address of
// RFC 4391 section 9.1.1: a 4-byte queue pair number, the link-local
// subnet prefix fe80::/64 and the port GUID.
func (c *netConf) ipoibAddr(seed [sha256.Size]byte) (net.HardwareAddr, error) {
	guid := net.HardwareAddr(seed[8:16])
	if c.RuntimeConfig.InfinibandGUID != "" {
		parsed, err := net.ParseMAC(c.RuntimeConfig.InfinibandGUID)
		if err != nil || len(parsed) != 8 {
			return nil, fmt.Errorf("runtimeConfig \"infinibandGUID\" is %q: want 8 colon-separated bytes",
				c.RuntimeConfig.InfinibandGUID)
		}
		guid = parsed
	}
	addr := make(net.HardwareAddr, 0, 20)
	addr = append(addr, 0, 0, seed[0], seed[1])
	addr = append(addr, 0xfe, 0x80, 0, 0, 0, 0, 0, 0)
	return append(addr, guid...), nil
}

// failure is the injected error for cmd when "failOn" names it.
func (c *netConf) failure(cmd string) error {
	if !slices.Contains(c.FailOn, cmd) {
		return nil
	}
	return types.NewError(types.ErrInternal, "injected failure: "+cmd, "")
}
