package vfadmin

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/hwnet-io/hwnet/api/vfreset"
)

// Owed performs the VF settings resets pending in a directory
// (api/vfreset): left by the shim, which tore a pod down with the agent
// away, or by a reset that failed. Its methods are safe for concurrent
// use.
type Owed struct {
	// Dir holds the pending resets.
	Dir string
	// Admin performs them; nil performs none (an agent that sets no VF
	// settings), and each stays pending, saying so.
	Admin  Admin
	Logger *slog.Logger
	mu     sync.Mutex
	// said is each failure last logged, by VF: a retry that fails the
	// same way is not logged again.
	said map[string]string
}

// Outstanding is a reset still owed, and why it is not done.
type Outstanding struct {
	vfreset.Pending
	Err error
}

// errNoAdmin is why a reset stays pending with no Admin.
var errNoAdmin = errors.New("this agent sets no VF settings (--vf-admin)")

// Settle performs every pending reset, removing each one done, and
// returns those still owed, with why. A file that cannot be read fails
// it: which VF it withholds is not known.
func (o *Owed) Settle(ctx context.Context) ([]Outstanding, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	pending, err := vfreset.List(o.Dir)
	if err != nil {
		return nil, err
	}
	var left []Outstanding
	said := map[string]string{}
	for _, p := range pending {
		if err := o.settle(ctx, p); err != nil {
			left = append(left, Outstanding{Pending: p, Err: err})
			said[p.Record.PCIAddress] = o.sayFailed(p, err)
		}
	}
	o.said = said
	return left, nil
}

// sayFailed logs a failed reset unless it failed so last time, and
// returns what it says.
func (o *Owed) sayFailed(p vfreset.Pending, err error) string {
	msg := err.Error()
	if o.Logger != nil && o.said[p.Record.PCIAddress] != msg {
		o.Logger.Warn("VF settings reset still pending: the VF stays out of every pool until it is done", "device", p.Record.PCIAddress,
			"reason", p.Reason, "since", p.Since, "err", err)
	}
	return msg
}

func (o *Owed) settle(ctx context.Context, p vfreset.Pending) error {
	if o.Admin == nil {
		return errNoAdmin
	}
	r := p.Record
	if err := Reset(ctx, o.Admin, r); err != nil {
		return err
	}
	if err := vfreset.Done(o.Dir, r.PCIAddress); err != nil {
		return err
	}
	if o.Logger != nil {
		o.Logger.Info("pending VF settings reset done", "device", r.PCIAddress, "pf", r.PFPCIAddress, "vf", r.Index, "reason", p.Reason, "since", p.Since)
	}
	return nil
}
