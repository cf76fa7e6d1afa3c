package dra

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// claimClock times the claims of one kubelet call: each claim's own work,
// and the call's shared work (reading and saving the checkpoint, telling
// the device ledger), which every claim of the call waits for.
type claimClock struct {
	spent map[types.UID]time.Duration
	// on is the claim being worked on, "" for the call's shared work,
	// since mark.
	on   types.UID
	mark time.Time
}

func startClaimClock() *claimClock {
	return &claimClock{spent: map[types.UID]time.Duration{}, mark: time.Now()}
}

// switchTo ends the work on the current claim, or the shared work, and
// begins the work on uid, "" for the shared work.
func (c *claimClock) switchTo(uid types.UID) {
	now := time.Now()
	c.spent[c.on] += now.Sub(c.mark)
	c.on, c.mark = uid, now
}

// stop ends the call: what is left counts as shared work.
func (c *claimClock) stop() { c.switchTo("") }

// took is the claim's own work and the call's shared work, once the clock
// stopped.
func (c *claimClock) took(uid types.UID) time.Duration {
	return c.spent[""] + c.spent[uid]
}
