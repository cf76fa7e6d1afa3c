// Package ledger is the node's one record of who holds each device, and
// the one path a device takes to change hands.
//
// The holders are a pod kubelet allocated the device to through a device
// plugin (kubelet's PodResources API), a DRA claim a driver prepared it for
// (every hwnet DRA checkpoint on the node), a container hwnet's CNI
// attached it to (the attachment records). They are read from those
// sources (Reader), never kept only in memory, so an agent that restarts
// knows what its predecessor handed out before any front end serves.
//
// A Book keeps them live: every hand-out (device plugin Allocate, DRA
// prepare, the CNI ADD's device binding) is a Reserve, synchronous, under
// one lock, refused with an error naming the device and its holder when
// it conflicts, and every give-back a Release. A VF layout change or a
// pool's mode switch fences the devices it changes first. The Book fails
// closed: while a source cannot be read, no device is handed out, and
// the front ends offer none (Ledger.Unknown), until it is read again.
package ledger

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// Kind is what holds a device.
type Kind string

// The holders a ledger knows.
const (
	// Pod is a device plugin allocation of a pod's container.
	Pod Kind = "pod"
	// Claim is a DRA claim prepared on this node.
	Claim Kind = "claim"
	// Container is a CNI attachment of a sandbox.
	Container Kind = "container"
)

// Holder is one holder of a device.
type Holder struct {
	Kind Kind `json:"kind"`
	// Resource is the pool the device was handed out as: the device
	// plugin's resource or the claim device's pool resource; for a
	// Container, the resource its attachment names, if any.
	Resource string `json:"resource,omitempty"`
	// Namespace and Name are the pod's (Pod, Container) or the claim's.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	// Container is the container's name (Pod) or the sandbox's ID
	// (Container).
	Container string `json:"container,omitempty"`
	// PodUIDs are the pods a Claim is reserved for, a Container's pod, or
	// a Pod's UID when the pods' cache knows it.
	PodUIDs []string `json:"podUIDs,omitempty"`
	// UID is a Claim's UID; for a Container, the UID of the claim its
	// attachment has the device through, if any (a shared claim holds it
	// for pods it was not prepared for).
	UID string `json:"uid,omitempty"`
	// Since is when the hold began as far as its source says: the
	// device-info file's, checkpoint's or record's time; zero if unknown.
	Since time.Time `json:"since,omitzero"`
}

// String names the holder as an operator reads it.
func (h Holder) String() string {
	switch {
	case h.Pending():
		return fmt.Sprintf("an allocation of %s kubelet has not reported yet", h.Resource)
	case h.Kind == Pod:
		return fmt.Sprintf("pod %s/%s (container %s, %s)", h.Namespace, h.Name, h.Container, h.Resource)
	case h.Kind == Claim:
		return fmt.Sprintf("claim %s/%s", h.Namespace, h.Name)
	}
	return fmt.Sprintf("container %s of pod %s/%s", shortID(h.Container), h.Namespace, h.Name)
}

// Pending reports whether h is a device plugin allocation Allocate made
// that kubelet's PodResources does not report yet: its pod is not known.
func (h Holder) Pending() bool { return h.Kind == Pod && h.Name == "" }

func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// Ledger is who holds which device at one moment.
type Ledger struct {
	byDevice map[string][]Holder
	// Unknown names the sources that could not be read, with why: a
	// device one of them would list may be held.
	Unknown []string
	// ReadAt is when the sources were read, the oldest answer's time: a
	// hold that began later may not be in the ledger.
	ReadAt time.Time
	// taken is when the read began, done when it ended: a read that began
	// before another ended may have seen a file before that one did.
	taken, done time.Time
	// kube is the read's knowledge of kubelet, kept whole so that another
	// read (withNewerKubelet) or reader (Reader.follow) takes all of it.
	kube kubeletRead
	// fences are the fences in force, by key (a Book's, with resets).
	fences []Fence
	// resets are the fences of the pending VF resets, as the sources
	// were read.
	resets []Fence
	// kubelet and rest are what kubelet's answer and the other sources
	// said, which byDevice, Unknown and resets compose (withNewerKubelet).
	kubelet, rest sourcePart
	// book published the ledger as its snapshot of this version, the
	// same while one is Equal to the one before; nil for a ledger no Book
	// published.
	book    *Book
	version uint64
}

// New makes a ledger, read now, of the holders by device ID (a PCI
// address), each device's holders in a stable order.
func New(byDevice map[string][]Holder, unknown []string) *Ledger {
	for _, hs := range byDevice {
		slices.SortFunc(hs, compareHolders)
	}
	now := time.Now()
	// Holders no reader of kubelet gave are the other sources'.
	rest := sourcePart{answers: []map[string][]Holder{byDevice}, unknown: unknown}
	return &Ledger{byDevice: byDevice, Unknown: unknown, ReadAt: now, taken: now, done: now, rest: rest}
}

func compareHolders(a, b Holder) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Container, b.Container), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.UID, b.UID))
}

// Holders are the device's holders, none when it is free.
func (l *Ledger) Holders(device string) []Holder {
	if l == nil {
		return nil
	}
	return l.byDevice[device]
}

// PodsOnly reports whether the device is held by device plugin pods
// alone: its hold ends when kubelet lets the pods go, which only asking
// kubelet tells.
func (l *Ledger) PodsOnly(device string) bool {
	hs := l.Holders(device)
	return len(hs) > 0 && !slices.ContainsFunc(hs, func(h Holder) bool { return h.Kind != Pod })
}

// Complete reports whether every source was read.
func (l *Ledger) Complete() bool { return l != nil && len(l.Unknown) == 0 }

// UnknownWhy says why any device may be held by a holder the ledger does
// not know, "" when every source was read.
func (l *Ledger) UnknownWhy() string {
	switch {
	case l == nil:
		return "the device ledger is not read yet"
	case len(l.Unknown) == 0:
		return ""
	}
	return "who holds it is unknown: " + strings.Join(l.Unknown, "; ")
}

// Held is the set of devices a pod, claim or sandbox holds, or nil when a
// source is unknown: then any device may be held. A device only
// allocations kubelet has not reported hold is not in it: their pods'
// sandboxes are not made yet, so its netdev is in none of them.
func (l *Ledger) Held() map[string]bool {
	if !l.Complete() {
		return nil
	}
	held := make(map[string]bool, len(l.byDevice))
	for id := range l.byDevice {
		if l.IsHeld(id) {
			held[id] = true
		}
	}
	return held
}

// IsHeld reports whether a pod, claim or sandbox holds the device, as
// Held counts it.
func (l *Ledger) IsHeld(device string) bool {
	return slices.ContainsFunc(l.Holders(device), func(h Holder) bool { return !h.Pending() })
}

// Devices are the held devices' IDs, sorted.
func (l *Ledger) Devices() []string {
	if l == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(l.byDevice))
}

// Equal reports whether two ledgers say the same.
func (l *Ledger) Equal(o *Ledger) bool {
	devices, every := l.Changed(o)
	return !every && len(devices) == 0
}

// Changed names the devices whose holders differ between l and o, sorted,
// and reports whether more than their holders differs: the sources
// unknown or the fences, which bear on every device.
func (l *Ledger) Changed(o *Ledger) (devices []string, every bool) {
	if l == nil || o == nil {
		return nil, l != o
	}
	// A Book's snapshots of one version are equal: an idle node's poll
	// compares none of its holders.
	if l.book != nil && l.book == o.book && l.version == o.version {
		return nil, false
	}
	if !slices.Equal(l.Unknown, o.Unknown) || !slices.EqualFunc(l.fences, o.fences, Fence.equal) {
		return nil, true
	}
	for id, hs := range l.byDevice {
		if !sameHolders(hs, o.byDevice[id]) {
			devices = append(devices, id)
		}
	}
	for id := range o.byDevice {
		if _, ok := l.byDevice[id]; !ok {
			devices = append(devices, id)
		}
	}
	slices.Sort(devices)
	return devices, false
}

// sameHolders reports whether two lists of a device's holders say the
// same, each in the stable order New sorts them in.
func sameHolders(a, b []Holder) bool {
	return slices.EqualFunc(a, b, func(x, y Holder) bool {
		return compareHolders(x, y) == 0 && x.Since.Equal(y.Since) && slices.Equal(x.PodUIDs, y.PodUIDs) && x.UID == y.UID
	})
}

// Counts are how many of the devices are free and held by each kind of
// holder, a device counted once, by its first holder in the order claim,
// container, pod.
func (l *Ledger) Counts(devices []string) map[Kind]int {
	out := map[Kind]int{Pod: 0, Claim: 0, Container: 0, "": 0}
	for _, id := range devices {
		hs := l.Holders(id)
		if len(hs) == 0 {
			out[""]++
			continue
		}
		out[hs[0].Kind]++
	}
	return out
}
