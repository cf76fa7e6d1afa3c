package vfsettings

// Record is what hwnet set on one VF, written to disk (the DRA checkpoint,
// the CNI attachment record) before the first call that sets it, so that
// unprepare, DEL or GC after a crash resets it from the record alone.
type Record struct {
	// PF is the PF's netdev, through which the VF's settings are set.
	PF string `json:"pf"`
	// Index is the VF's index under its PF.
	Index int `json:"index"`
	// PCIAddress is the VF's, by which its netdev is found again.
	PCIAddress string `json:"pciAddress"`
	// Settings are what was asked for.
	Settings Settings `json:"settings"`
	// Original is the VF netdev's MAC and MTU before they were changed,
	// what a reset puts back; zero when there was no netdev.
	Original Original `json:"original,omitzero"`
	// Applied is set once every setting was set: a record without it was
	// being applied when the agent stopped, and a retried prepare sets
	// it again.
	Applied bool `json:"applied,omitempty"`
}

// Original is a VF netdev's own settings before hwnet changed them.
type Original struct {
	MAC string `json:"mac,omitempty"`
	MTU int    `json:"mtu,omitempty"`
}

// Defaults are the settings that undo r.Settings: for each field r set,
// the kernel's default for a new VF (VLAN 0 with QoS 0 and 802.1Q, spoof
// check on, trust off, no rate limits, link state auto) or the VF's
// original MAC and MTU; a MAC or MTU with no original is left as it is.
func (r Record) Defaults() Settings {
	var d Settings
	s := r.Settings
	if s.SetsVLAN() {
		d.VLAN, d.VLANQoS, d.VLANProto = ptr(0), ptr(0), ProtoDot1Q
	}
	if s.SpoofChk != nil {
		d.SpoofChk = ptr(true)
	}
	if s.Trust != nil {
		d.Trust = ptr(false)
	}
	if s.SetsRate() {
		d.MinTxRate, d.MaxTxRate = ptr[uint64](0), ptr[uint64](0)
	}
	if s.LinkState != "" {
		d.LinkState = LinkAuto
	}
	if s.MTU != nil && r.Original.MTU != 0 {
		d.MTU = ptr(r.Original.MTU)
	}
	if s.MAC != "" && r.Original.MAC != "" {
		d.MAC = r.Original.MAC
	}
	return d
}

func ptr[T any](v T) *T { return &v }
