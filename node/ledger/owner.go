package ledger

import "slices"

// FrontEnd is how a pool hands its devices out.
type FrontEnd struct {
	// Resource is the pool's full resource name.
	Resource string
	// DRA is true for a pool served through the DRA driver, false for one
	// served through its device plugin.
	DRA bool
}

// Foreign is the first holder of the device that the pool's front end did
// not hand it to, if any: while there is one, the pool must not hand the
// device out. A device plugin pool owns its own resource's allocations; a
// DRA pool owns the claims prepared on the node. A CNI attachment belongs
// to whichever of those holds the device for the same pod, and is foreign
// when none does: its sandbox still has the device (its pod is gone, the
// teardown has not run yet).
func (l *Ledger) Foreign(device string, fe FrontEnd) (Holder, bool) {
	hs := l.Holders(device)
	for _, h := range hs {
		if !fe.owns(h, hs) {
			return h, true
		}
	}
	return Holder{}, false
}

func (fe FrontEnd) owns(h Holder, all []Holder) bool {
	switch h.Kind {
	case Pod:
		return !fe.DRA && h.Resource == fe.Resource
	case Claim:
		return fe.DRA
	}
	return slices.ContainsFunc(all, func(o Holder) bool { return o.Kind != Container && fe.owns(o, nil) && samePod(o, h) })
}

// samePod reports whether a Pod or Claim holder o holds the device for
// the Container holder c's pod.
func samePod(o, c Holder) bool {
	if o.Kind == Claim {
		if len(c.PodUIDs) == 0 {
			return o.Namespace == c.Namespace // a record older than pod UIDs
		}
		return slices.Contains(o.PodUIDs, c.PodUIDs[0])
	}
	return o.Namespace == c.Namespace && o.Name == c.Name
}
