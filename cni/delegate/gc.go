package delegate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
)

// gcLockWait bounds the wait for a container another operation holds: GC
// leaves a busy container for its next round.
const gcLockWait = 100 * time.Millisecond

// gc (CNI 1.1) deletes every container the runtime no longer lists as one
// of hwnet's attachments, then asks each network still in use to collect
// its own garbage, telling it which of its attachments are valid.
func (d *Delegator) gc(ctx context.Context, c *call) error {
	valid, err := runtimeValid(c.req.Config)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	return d.collectGarbage(ctx, c, keepValid(valid))
}

// keep is what a GC round keeps whatever hwnet's records say.
type keep struct {
	// containers are the containers whose records stay.
	containers map[string]bool
	// defaults are the default network's attachments that stay valid,
	// hwnet's record or not: the runtime attached some itself before
	// hwnet, the records of others went (an uninstall), and their leases
	// are in use all the same.
	defaults []types.GCAttachment
	// defaultsErr, when set, says the default network's valid attachments
	// are unknown: its GC is skipped rather than told too few.
	defaultsErr error
}

// keepValid is what the runtime's valid attachments of hwnet keep: their
// containers, and each as an attachment of the default network, which
// hwnet runs with the runtime's container ID and interface name.
func keepValid(valid []types.GCAttachment) keep {
	k := keep{containers: make(map[string]bool, len(valid)), defaults: valid}
	for _, a := range valid {
		k.containers[a.ContainerID] = true
	}
	return k
}

// collectGarbage deletes every recorded container k does not keep, then
// has each network still in use collect its own garbage.
func (d *Delegator) collectGarbage(ctx context.Context, c *call, k keep) error {
	gone, err := d.collectContainers(ctx, c, k.containers)
	return errors.Join(err, d.collectNetworks(ctx, c, gone, k))
}

// collectContainers deletes the attachments of every recorded container
// not in valid and returns the containers it judged gone, deleted or not.
// A container another operation holds (an ADD whose plugin is still
// running, a DEL) is not judged: it is kept, whatever the runtime said.
func (d *Delegator) collectContainers(ctx context.Context, c *call, valid map[string]bool) (map[string]bool, error) {
	ids, err := c.store.List()
	if err != nil {
		return nil, err
	}
	gone := map[string]bool{}
	var errs []error
	for _, id := range ids {
		if valid[id] {
			continue
		}
		judged, err := d.collect(ctx, c, id)
		gone[id] = judged
		errs = append(errs, err)
	}
	return gone, errors.Join(errs...)
}

// runtimeValid is the runtime's list of hwnet's valid attachments. A GC
// without one is refused: the runtime said nothing of which pods live,
// and nothing can be collected on that. The spec's first text named the
// key cni.dev/attachments (containernetworking/cni#1101), read when the
// current one is absent; null, as libcni sends an empty list, is empty.
func runtimeValid(config []byte) ([]types.GCAttachment, error) {
	var conf map[string]json.RawMessage
	if err := json.Unmarshal(config, &conf); err != nil {
		return nil, fmt.Errorf("GC: %w", err)
	}
	for _, key := range []string{"cni.dev/valid-attachments", "cni.dev/attachments"} {
		raw, ok := conf[key]
		if !ok {
			continue
		}
		var valid []types.GCAttachment
		if err := json.Unmarshal(raw, &valid); err != nil {
			return nil, fmt.Errorf("GC: %s: %w", key, err)
		}
		return valid, nil
	}
	return nil, errors.New("GC: the configuration has no cni.dev/valid-attachments: without the runtime's list of valid attachments nothing is collected")
}

// collect deletes a stale container's attachments unless another
// operation holds it; it reports whether it judged the container gone
// (false when it was busy).
func (d *Delegator) collect(ctx context.Context, c *call, id string) (bool, error) {
	lockCtx, cancel := context.WithTimeout(ctx, gcLockWait)
	defer cancel()
	unlock, err := c.store.Lock(lockCtx, id)
	if err != nil {
		return false, nil
	}
	defer unlock()
	rec, err := c.store.Load(id)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil // gone meanwhile
	}
	if err != nil {
		// Unreadable even under its lock: torn down as its DEL would,
		// so that the device ledger, which cannot tell what it holds
		// and hands nothing out meanwhile, can read every record again.
		return true, d.delUntrusted(ctx, c.forContainer(&attachmentapi.Record{ContainerID: id}), nil, err)
	}
	d.opts.Logger.Info("GC: deleting the attachments of a container the runtime no longer has", "container", id)
	if doubt := attachments.Doubtful(rec); doubt != nil {
		// As its DEL would: a record no DEL can run from as it stands
		// would fail every round for good.
		return true, d.delUntrusted(ctx, c.forContainer(rec), rec, doubt)
	}
	if err := d.deleteRecord(ctx, c, rec); err != nil {
		return true, fmt.Errorf("GC container %s: %w", id, err)
	}
	return true, nil
}

// collectNetworks has every network in use collect its own garbage (CNI
// 1.1 GC), told that every attachment on record is valid but those of the
// containers judged gone; the default network is also told of k's
// defaults, which no record may name.
//
// cni.dev/valid-attachments names attachments by container ID and
// ifname, and a network's plugins (IPAM first) free whatever it does not
// name. An ADD records its attachments, ifnames included, before its first
// plugin runs, so the records name every attachment made or being made;
// but an ADD that starts after they are read would run its plugins unnamed
// beside the GC. Each ADD therefore holds d.attaching (shared) from
// recording its attachments to the end of its plugins, and the networks
// collect only while no ADD holds it, the records read under it: a round
// that meets an ADD running leaves the networks for the next one rather
// than wait on a plugin that may take its whole timeout. A kept container
// whose record cannot be read names no ifname: no network is told of its
// attachments, so none collects.
func (d *Delegator) collectNetworks(ctx context.Context, c *call, gone map[string]bool, k keep) error {
	if !d.attaching.TryLock() {
		d.opts.Logger.Debug("GC of the networks left for the next round: an ADD is running")
		return nil
	}
	defer d.attaching.Unlock()
	kept, err := d.keptRecords(c, gone)
	if err != nil {
		return fmt.Errorf("GC of the networks skipped: %w", err)
	}
	lists, err := d.networksInUse(c)
	errs := []error{err}
	for i, l := range lists {
		valid := validAttachments(kept, l.Name)
		if i == 0 { // networksInUse lists the default network first
			if k.defaultsErr != nil {
				errs = append(errs, fmt.Errorf("GC of default network %s skipped: %w", l.Name, k.defaultsErr))
				continue
			}
			valid = union(valid, k.defaults)
		}
		if err := c.chain.GC(ctx, l, valid); err != nil {
			errs = append(errs, fmt.Errorf("GC network %s: %w", l.Name, err))
		}
	}
	return errors.Join(errs...)
}

// union is a and b without repeats, in a stable order.
func union(a, b []types.GCAttachment) []types.GCAttachment {
	out := slices.Concat(a, b)
	slices.SortFunc(out, func(x, y types.GCAttachment) int {
		return cmp.Or(cmp.Compare(x.ContainerID, y.ContainerID), cmp.Compare(x.IfName, y.IfName))
	})
	return slices.Compact(out)
}

// keptRecords reads the record of every container not judged gone; one
// that cannot be read is an error.
func (d *Delegator) keptRecords(c *call, gone map[string]bool) ([]*attachmentapi.Record, error) {
	ids, err := c.store.List()
	if err != nil {
		return nil, err
	}
	var kept []*attachmentapi.Record
	for _, id := range ids {
		if gone[id] {
			continue
		}
		rec, err := c.store.Load(id)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("the attachments of kept container %s are unknown: %w", id, err)
		}
		kept = append(kept, rec)
	}
	return kept, nil
}

// validAttachments are the attachments of the kept containers that ran
// the named configuration list.
func validAttachments(recs []*attachmentapi.Record, listName string) []types.GCAttachment {
	var out []types.GCAttachment
	for _, rec := range recs {
		for _, a := range rec.Attachments {
			l, err := attachments.Delegate(a)
			if err == nil && l.Name == listName {
				out = append(out, types.GCAttachment{ContainerID: rec.ContainerID, IfName: a.IfName})
			}
		}
	}
	return out
}

// kubeletIfName is the interface kubelet gives a pod's default network,
// for a record that names no default attachment.
const kubeletIfName = "eth0"

// forContainer is c as the DEL of rec's container, which a GC request,
// naming no container, is not: the default network's DEL and the
// device-info files of an untrusted record are the container's.
func (c *call) forContainer(rec *attachmentapi.Record) *call {
	req := *c.req
	req.Command, req.ContainerID, req.Netns, req.IfName = "DEL", rec.ContainerID, rec.Netns, kubeletIfName
	for _, a := range rec.Attachments {
		if a.Default {
			req.IfName = a.IfName
		}
	}
	cc := *c
	cc.req = &req
	return &cc
}
