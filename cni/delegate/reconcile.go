package delegate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/wire"
)

// Reconcile is the agent's own garbage collection, for runtimes that never
// call CNI GC (containerd 1.x and 2.x): every container with a record that
// is not among the runtime's live sandboxes, and whose record has not
// changed for grace, is torn down from its record, as GC would (CNI 1.1);
// then every network in use collects its own garbage (IPAM leases) given
// the attachments that remain, and the default network also every
// attachment of a live sandbox, hwnet's record or not (runtimeDefaults).
// grace covers a sandbox whose ADD has just finished but which the runtime
// lists only afterwards. conf is hwnet's plugin configuration as the
// runtime passes it, path the CNI plugin path. It returns the containers
// it tore down.
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
	k := keep{containers: valid}
	k.defaults, k.defaultsErr = d.runtimeDefaults(c, live, now.Add(-grace))
	gcErr := d.collectGarbage(ctx, c, k)
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

// runtimeDefaults are the default network's attachments that stay valid
// in a reconcile, where the runtime names live sandboxes but no
// attachments: every live sandbox's on kubelet's interface, and every one
// the runtime's libcni cache holds of the default network or of hwnet
// (attachments.RuntimeCache) for a live sandbox or written since (the
// ADD of a sandbox the runtime does not list yet). A sandbox the runtime
// lists is live whether hwnet has a record of it or not: the runtime may
// have attached it before hwnet, or its record went with an uninstall.
func (d *Delegator) runtimeDefaults(c *call, live map[string]bool, since time.Time) ([]types.GCAttachment, error) {
	def, err := d.defaultAttachment(c)
	if err != nil {
		return nil, err
	}
	rc := attachments.RuntimeCache{Dir: c.conf.RuntimeCacheDir, Own: c.conf.Name, Default: def.delegate}
	cached, err := rc.Attachments()
	if err != nil {
		return nil, fmt.Errorf("the attachments of the runtime's libcni cache are unknown: %w", err)
	}
	out := make([]types.GCAttachment, 0, len(live)+len(cached))
	for id := range live {
		out = append(out, types.GCAttachment{ContainerID: id, IfName: kubeletIfName})
	}
	for _, a := range cached {
		if live[a.ContainerID] || !a.Written.Before(since) {
			out = append(out, types.GCAttachment{ContainerID: a.ContainerID, IfName: a.IfName})
		}
	}
	return union(out, nil), nil
}
