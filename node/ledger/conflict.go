package ledger

import (
	"errors"
	"fmt"
)

// Reason is why a device cannot change hands.
type Reason string

// The reasons a Reserve or a Fence is refused.
const (
	// Held: a holder the request is not compatible with has the device.
	Held Reason = "held"
	// Fenced: a fence withdraws the device (a VF layout change, a pool's
	// mode switch).
	Fenced Reason = "fenced"
	// Unknown: a source of holders cannot be read, so the device may be
	// held.
	Unknown Reason = "unknown"
	// Unhealthy: the device's health refuses it.
	Unhealthy Reason = "unhealthy"
)

// Conflict is a refused hand-out: the first device that cannot go, and
// why. Its message is what kubelet shows on the pod.
type Conflict struct {
	Device string
	Reason Reason
	// Holder is the holder in the way, for Held.
	Holder Holder
	// Why says it as an operator reads it.
	Why string
	// refreshable says a fresh read of the sources may settle it.
	refreshable bool
}

func (c *Conflict) Error() string {
	switch c.Reason {
	case Held:
		return fmt.Sprintf("device %s is held by %s", c.Device, c.Why)
	case Fenced:
		return fmt.Sprintf("device %s is fenced: %s", c.Device, c.Why)
	case Unknown:
		return fmt.Sprintf("device %s: %s", c.Device, c.Why)
	}
	return fmt.Sprintf("device %s is unhealthy: %s", c.Device, c.Why)
}

// conflictReason is err's Reason, "error" for another error.
func conflictReason(err error) string {
	var c *Conflict
	if errors.As(err, &c) {
		return string(c.Reason)
	}
	return "error"
}
