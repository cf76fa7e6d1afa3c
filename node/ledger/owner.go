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
// the Container holder c's pod: by UID where both say it, else (a record
// older than pod UIDs, a pod the pods' cache does not know) by namespace
// and name; a claim also holds it for an attachment made through it. A pending allocation's pod is not known: it is the pod's only
// if nothing else says otherwise, which the caller decides.
func samePod(o, c Holder) bool {
	if o.Kind == Claim {
		if c.UID != "" && c.UID == o.UID {
			return true
		}
		if len(c.PodUIDs) == 0 {
			return o.Namespace == c.Namespace
		}
		return slices.Contains(o.PodUIDs, c.PodUIDs[0])
	}
	if len(o.PodUIDs) > 0 && len(c.PodUIDs) > 0 {
		return o.PodUIDs[0] == c.PodUIDs[0]
	}
	return o.Namespace == c.Namespace && o.Name == c.Name
}

// sameHolder reports whether a and b are one holder: the same pod
// container's allocation of a resource, the same claim, the same sandbox.
func sameHolder(a, b Holder) bool {
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case Pod:
		return a.Resource == b.Resource && a.Namespace == b.Namespace && a.Name == b.Name && a.Container == b.Container
	case Claim:
		if a.UID != "" && b.UID != "" {
			return a.UID == b.UID
		}
		return a.Namespace == b.Namespace && a.Name == b.Name
	}
	return a.Container == b.Container
}

// compatible reports whether the device may go to h while e holds it; all
// are the device's holders. Each front end's own hands may overlap where
// the holder is one: kubelet's allocations of one resource (it keeps them
// apart itself, and reuses an init container's devices), a claim and the
// attachments of the pods it is reserved for, a pod's allocation and its
// own sandbox's attachment.
func compatible(h, e Holder, all []Holder) bool {
	switch h.Kind {
	case Pod:
		switch e.Kind {
		case Pod:
			return e.Resource == h.Resource
		case Container:
			return slices.ContainsFunc(all, func(o Holder) bool {
				return o.Kind == Pod && !o.Pending() && o.Resource == h.Resource && samePod(o, e)
			})
		}
		return false
	case Claim:
		switch e.Kind {
		case Claim:
			return sameHolder(h, e)
		case Container:
			return samePod(h, e)
		}
		return false
	}
	switch e.Kind {
	case Container:
		return e.Container == h.Container
	case Pod:
		if e.Pending() {
			return e.Resource == h.Resource
		}
		return samePod(e, h)
	}
	return samePod(e, h)
}
