package vfsettings

import "cmp"

// Record is what hwnet set on one VF, written to disk (the DRA checkpoint,
// the CNI attachment record, a pending reset) before the first call that
// sets it, so that unprepare, DEL or GC after a crash resets it from the
// record alone.
type Record struct {
	// PF is the PF's netdev when the record was made. Records written
	// before PFPCIAddress know the PF by it alone; newer ones only name
	// the PF with it in messages: a netdev name moves with a rename or a
	// driver reload.
	PF string `json:"pf"`
	// PFPCIAddress is the PF's PCI address, by which a reset finds the
	// PF's netdev as it is named then.
	PFPCIAddress string `json:"pfPciAddress,omitempty"`
	// Index is the VF's index under its PF.
	Index int `json:"index"`
	// PCIAddress is the VF's, by which its netdev is found again.
	PCIAddress string `json:"pciAddress"`
	// Settings are what was asked for.
	Settings Settings `json:"settings"`
	// Original is the VF netdev's MAC and MTU before they were changed;
	// zero when there was no netdev. Its MTU is what a reset puts back
	// when Prior has none.
	Original Original `json:"original,omitzero"`
	// Prior is the VF's settings as its PF reported them before the
	// first change (the MTU its netdev's): what a reset puts back. A
	// record without it, written before hwnet read them, is reset to
	// Defaults.
	Prior *Settings `json:"prior,omitempty"`
	// PriorPKeyIndex is the physical P_Key index the VF's virtual index 0
	// mapped to before Settings.PKey was set ("0", "none"): what a reset
	// writes back. "" for a record without a partition key; a reader
	// older than it resets none.
	PriorPKeyIndex string `json:"priorPKeyIndex,omitempty"`
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

// UnsetMAC is the MAC a PF reports for a VF whose MAC it does not
// administer: setting it through the PF gives the VF's MAC back to the
// VF's own driver.
const UnsetMAC = "00:00:00:00:00:00"

// Restore are the settings that undo r.Settings: for each field r set,
// what the VF had before (Prior). A field Prior does not hold is put to
// its Defaults value; a record without Prior is reset to Defaults.
func (r Record) Restore() Settings {
	if r.Prior == nil {
		return r.Defaults()
	}
	d, p, s := r.Defaults(), *r.Prior, r.Settings
	if s.SetsVLAN() && p.VLAN != nil {
		d.VLAN, d.VLANQoS = ptr(*p.VLAN), ptr(deref(p.VLANQoS))
		d.VLANProto = cmp.Or(p.VLANProto, ProtoDot1Q)
	}
	if s.SpoofChk != nil && p.SpoofChk != nil {
		d.SpoofChk = ptr(*p.SpoofChk)
	}
	if s.Trust != nil && p.Trust != nil {
		d.Trust = ptr(*p.Trust)
	}
	if s.SetsRate() && (p.MinTxRate != nil || p.MaxTxRate != nil) {
		d.MinTxRate, d.MaxTxRate = ptr(deref(p.MinTxRate)), ptr(deref(p.MaxTxRate))
	}
	if s.LinkState != "" && p.LinkState != "" {
		d.LinkState = p.LinkState
	}
	if s.MTU != nil && p.MTU != nil {
		d.MTU = ptr(*p.MTU)
	}
	if s.MAC != "" && p.MAC != "" {
		d.MAC = p.MAC
	}
	return d
}

// Defaults are the settings that undo r.Settings when what the VF had is
// not known: for each field r set, the kernel's default for a new VF
// (VLAN 0 with QoS 0 and 802.1Q, spoof check on, trust off, no rate
// limits, link state auto, a MAC the PF does not administer) or the VF
// netdev's original MTU; an MTU with no original is left as it is.
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
	if s.MAC != "" {
		d.MAC = UnsetMAC
	}
	return d
}

func ptr[T any](v T) *T { return &v }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
