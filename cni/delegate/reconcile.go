package delegate

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/hwnet-io/hwnet/cni/wire"
)

// Reconcile is the agent's own garbage collection, for runtimes that never
// call CNI GC (containerd 1.x and 2.x): every container with a record that
// is not among the runtime's live sandboxes, and whose record has not
// changed for grace, is torn down from its record, as GC would (CNI 1.1);
// then every network in use collects its own garbage (IPAM leases) given
// the attachments that remain. grace covers a sandbox whose ADD has just
// finished but which the runtime lists only afterwards. conf is hwnet's
// plugin configuration as the runtime passes it, path the CNI plugin path.
// It returns the containers it tore down.
func (d *Delegator) Reconcile(ctx context.Context, conf []byte, path string, live map[string]bool, grace time.Duration) ([]string, error) {
	c, err := d.newCall(&wire.Request{Command: "GC", Config: conf, Path: path})
	if err != nil {
		return nil, err
	}
	before, err := c.store.List()
	if err != nil {
		return nil, err
	}
	valid := make(map[string]bool, len(live))
	maps.Copy(valid, live)
	now := time.Now()
	for _, id := range before {
		if mod, err := c.store.Modified(id); err != nil || now.Sub(mod) < grace {
			valid[id] = true
		}
	}
	gcErr := d.collectGarbage(ctx, c, valid)
	after, err := c.store.List()
	if err != nil {
		return nil, err
	}
	var collected []string
	for _, id := range before {
		if !valid[id] && !slices.Contains(after, id) {
			collected = append(collected, id)
		}
	}
	return collected, gcErr
}
