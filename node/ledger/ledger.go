// Package ledger is the node's one record of who holds each device: a pod
// kubelet allocated it to through a device plugin (kubelet's PodResources
// API), a DRA claim the driver prepared it for (the driver's checkpoint),
// a container hwnet's CNI attached it to (the attachment records). It is
// rebuilt from those sources, never kept only in memory, so an agent that
// restarts knows at once what its predecessor handed out. Every decision
// that hands a device out or cleans one up asks it: the device plugins'
// lists, the ResourceSlices, health, the device-info collector.
package ledger

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
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
	// PodUIDs are the pods a Claim is reserved for, or a Container's pod.
	PodUIDs []string `json:"podUIDs,omitempty"`
	// Since is when the hold began as far as its source says: the
	// device-info file's, checkpoint's or record's time; zero if unknown.
	Since time.Time `json:"since,omitzero"`
}

// String names the holder as an operator reads it.
func (h Holder) String() string {
	switch h.Kind {
	case Pod:
		return fmt.Sprintf("pod %s/%s (container %s, %s)", h.Namespace, h.Name, h.Container, h.Resource)
	case Claim:
		return fmt.Sprintf("claim %s/%s", h.Namespace, h.Name)
	}
	return fmt.Sprintf("container %s of pod %s/%s", shortID(h.Container), h.Namespace, h.Name)
}

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
	// taken is when the read began.
	taken time.Time
}

// Older reports whether l was read before o began to be read: l is no
// news to whoever has o.
func (l *Ledger) Older(o *Ledger) bool { return o != nil && l.taken.Before(o.taken) }

// New makes a ledger, read now, of the holders by device ID (a PCI
// address), each device's holders in a stable order.
func New(byDevice map[string][]Holder, unknown []string) *Ledger {
	for _, hs := range byDevice {
		slices.SortFunc(hs, compareHolders)
	}
	now := time.Now()
	return &Ledger{byDevice: byDevice, Unknown: unknown, ReadAt: now, taken: now}
}

func compareHolders(a, b Holder) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Container, b.Container), cmp.Compare(a.Resource, b.Resource))
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

// Held is the set of held devices, or nil when a source is unknown: then
// any device may be held.
func (l *Ledger) Held() map[string]bool {
	if !l.Complete() {
		return nil
	}
	held := make(map[string]bool, len(l.byDevice))
	for id := range l.byDevice {
		held[id] = true
	}
	return held
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
	if l == nil || o == nil {
		return l == o
	}
	return slices.Equal(l.Unknown, o.Unknown) && maps.EqualFunc(l.byDevice, o.byDevice, func(a, b []Holder) bool {
		return slices.EqualFunc(a, b, func(x, y Holder) bool {
			return compareHolders(x, y) == 0 && x.Since.Equal(y.Since) && slices.Equal(x.PodUIDs, y.PodUIDs)
		})
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
