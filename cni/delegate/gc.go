package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	valid, err := validContainers(c.req.Config)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	return d.collectGarbage(ctx, c, valid)
}

// collectGarbage deletes every recorded container not in valid, then has
// each network still in use collect its own garbage.
func (d *Delegator) collectGarbage(ctx context.Context, c *call, valid map[string]bool) error {
	recs, err := d.records(c)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	var kept []*attachmentapi.Record
	for _, rec := range recs {
		if valid[rec.ContainerID] {
			kept = append(kept, rec)
			continue
		}
		if err := d.collect(ctx, c, rec.ContainerID); err != nil {
			errs = append(errs, err)
		}
	}
	lists, err := d.networksInUse(c)
	if err != nil {
		errs = append(errs, err)
	}
	for _, l := range lists {
		if err := c.chain.GC(ctx, l, validAttachments(kept, l.Name)); err != nil {
			errs = append(errs, fmt.Errorf("GC network %s: %w", l.Name, err))
		}
	}
	return errors.Join(errs...)
}

func validContainers(config []byte) (map[string]bool, error) {
	var conf struct {
		Valid []types.GCAttachment `json:"cni.dev/valid-attachments"`
	}
	if err := json.Unmarshal(config, &conf); err != nil {
		return nil, fmt.Errorf("GC: cni.dev/valid-attachments: %w", err)
	}
	valid := make(map[string]bool, len(conf.Valid))
	for _, a := range conf.Valid {
		valid[a.ContainerID] = true
	}
	return valid, nil
}

// collect deletes a stale container's attachments unless another
// operation holds it.
func (d *Delegator) collect(ctx context.Context, c *call, id string) error {
	lockCtx, cancel := context.WithTimeout(ctx, gcLockWait)
	defer cancel()
	unlock, err := c.store.Lock(lockCtx, id)
	if err != nil {
		return nil
	}
	defer unlock()
	rec, err := c.store.Load(id)
	if err != nil {
		return nil
	}
	d.opts.Logger.Info("GC: deleting the attachments of a container the runtime no longer has", "container", id)
	if err := d.deleteRecord(ctx, c, rec); err != nil {
		return fmt.Errorf("GC container %s: %w", id, err)
	}
	return nil
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
