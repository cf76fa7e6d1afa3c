package delegate

import (
	"context"
	"fmt"

	"github.com/containernetworking/cni/pkg/types"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/wire"
)

// Republish queues the network-status of the given containers again, from
// their records: the agent writes a pod's network-status in the
// background after answering its ADD, so an agent killed in between
// leaves a running pod without one, and nothing else would write it. The
// caller names containers whose pods run without network-status. A
// container whose ADD has not finished (its record lacks a result), or
// whose status this agent already has queued or is writing, is passed
// over. It returns the containers whose status it queued.
func (d *Delegator) Republish(ctx context.Context, conf []byte, path string, containers []string) ([]string, error) {
	if d.opts.Status == nil || len(containers) == 0 {
		return nil, nil
	}
	c, err := d.newCall(&wire.Request{Command: "GC", Config: conf, Path: path})
	if err != nil {
		return nil, err
	}
	var queued []string
	for _, id := range containers {
		ok, err := d.republishOne(ctx, c.store, id)
		if err != nil {
			return queued, err
		}
		if ok {
			queued = append(queued, id)
		}
	}
	return queued, nil
}

// republishOne queues one container's network-status under its lock, so
// that an ADD still running (which queues its own) is waited for.
func (d *Delegator) republishOne(ctx context.Context, store *attachments.Store, id string) (bool, error) {
	unlock, err := store.Lock(ctx, id)
	if err != nil {
		return false, fmt.Errorf("container %s: %w", id, err)
	}
	defer unlock()
	rec, err := store.Load(id)
	if err != nil || len(rec.Skipped) > 0 || rec.PodName == "" {
		return false, nil // gone, or not a record to publish from
	}
	ref := cache.PodRef{Namespace: rec.PodNamespace, Name: rec.PodName, UID: rec.PodUID}
	done, complete := recordedAttachments(rec)
	if !complete || d.status.busy(ref) {
		return false, nil
	}
	d.status.enqueue(ref, done)
	return true, nil
}

// recordedAttachments rebuilds what an ADD made from its record; complete
// is false while any attachment lacks its result.
func recordedAttachments(rec *attachmentapi.Record) ([]attached, bool) {
	done := make([]attached, 0, len(rec.Attachments))
	for _, e := range rec.Attachments {
		res := e.AddResult()
		if res == nil {
			return nil, false
		}
		done = append(done, attachedFromRecord(e, res))
	}
	return done, len(done) > 0
}

func attachedFromRecord(e attachmentapi.Attachment, res types.Result) attached {
	a := attached{attachment: attachment{network: e.Network, ifName: e.IfName, isDefault: e.Default,
		resource: e.Resource, deviceID: e.DeviceID, podNetwork: e.PodNetwork}, result: res, infoFile: e.DeviceInfoFile}
	if e.DefaultRoute != nil {
		a.sel = selection.Selection{HasDefaultRoute: true, DefaultRoute: e.DefaultRoute.Gateways}
	}
	return a
}
