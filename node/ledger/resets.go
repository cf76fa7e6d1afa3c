package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/hwnet-io/hwnet/api/vfreset"
)

// Withheld is a device a source keeps out of every pool, outside the
// Book's own fences: a VF whose settings reset hwnet owes (api/vfreset).
type Withheld struct {
	Device string
	// Reason says why, as refusals and hwnetctl devices show it.
	Reason string
	Since  time.Time
}

// ResetKeyPrefix begins the key of the fence a pending VF reset holds.
const ResetKeyPrefix = "vf-reset/"

// resetsSource names the pending resets in Unknown.
const resetsSource = "pending VF resets"

// ResetFiles lists the resets pending in dir without performing them:
// what hwnetctl shows. The agent's source performs them first
// (vfadmin.Owed).
func ResetFiles(dir string) func(context.Context) ([]Withheld, error) {
	return func(context.Context) ([]Withheld, error) {
		pending, err := vfreset.List(dir)
		if err != nil {
			return nil, err
		}
		out := make([]Withheld, 0, len(pending))
		for _, p := range pending {
			out = append(out, WithheldFor(p, nil))
		}
		return out, nil
	}
}

// WithheldFor is the withholding of a pending reset, with why its last
// try failed, if it did.
func WithheldFor(p vfreset.Pending, err error) Withheld {
	why := fmt.Sprintf("its VF settings reset is pending since %s (%s)", p.Since.UTC().Format(time.RFC3339), p.Reason)
	if err != nil {
		why += fmt.Sprintf("; the last try failed: %v", err)
	}
	return Withheld{Device: p.Record.PCIAddress, Reason: why, Since: p.Since}
}

// resets reads the withheld devices, which are fences (one per device)
// the ledger holds beside the Book's; a read that fails keeps the ones
// last read, and makes the source unknown.
func (r *Reader) resets(ctx context.Context) ([]Fence, error) {
	got, err := r.src.Resets(ctx)
	if err != nil {
		return r.lastResets, err
	}
	out := make([]Fence, 0, len(got))
	for _, w := range got {
		out = append(out, Fence{Key: ResetKeyPrefix + w.Device, Devices: []string{w.Device}, Reason: w.Reason, Since: w.Since})
	}
	r.lastResets = out
	return out, nil
}
