package ledger

import "slices"

// Verdicts are what the devices' health says to a hand-out.
type Verdicts struct {
	// Unhealthy says why each unhealthy device is: a hand-out of one is
	// refused.
	Unhealthy map[string]string
	// Away are the devices whose netdev is not in the node's network
	// namespace now: in a sandbox, or gone. A hand-out of one is refused
	// unless a sandbox's attachment holds it (the holders then decide) or
	// the asker already does. A device plugin allocation always comes
	// before its pod's sandbox moves a netdev, and kubelet allocates only
	// a device none of its pods holds: the netdev is gone, or in a sandbox
	// hwnet does not know, whatever a hold kubelet has not reported or
	// has let go of says.
	Away map[string]bool
}

// notJudgedWhy is why every device is refused before the first Judge.
const notJudgedWhy = "its health is not judged yet: the agent is starting"

// awayWhy is why a device whose netdev is away is refused.
const awayWhy = "its netdev is away from the node's network namespace and no attachment holds it: it is gone, or in a sandbox hwnet does not know"

// awayExplainedLocked reports whether d's netdev may be away for h: a
// sandbox's attachment holds d, or h holds it already (a claim prepared
// again).
func (b *Book) awayExplainedLocked(h Holder, d string) bool {
	return slices.ContainsFunc(b.holdersLocked(d), func(e Holder) bool {
		return e.Kind == Container || !e.Pending() && sameHolder(e, h)
	})
}
