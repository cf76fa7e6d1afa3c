package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
)

// containers are the devices the CNI attachment records hold. The records
// are listed again only when the set changed, and a record decoded again
// only when its file changed. One that cannot be read makes the source
// unknown: it may hold any device.
func (r *Reader) containers(context.Context) (map[string][]Holder, error) {
	changed, err := r.src.Records.Changed()
	if err != nil {
		return nil, err
	}
	if last, ok := r.last[recordsSource]; ok && changed.Equal(r.recordsChanged) {
		return last, nil
	}
	ids, err := r.src.Records.List()
	if err != nil {
		return nil, err
	}
	next := make(map[string]cachedRecord, len(ids))
	out := map[string][]Holder{}
	var errs []error
	for _, id := range ids {
		c, err := r.record(id)
		if err != nil {
			errs = append(errs, err)
		}
		next[id] = c
		for dev, h := range c.holders {
			out[dev] = append(out[dev], h)
		}
	}
	r.records = next
	if err := errors.Join(errs...); err != nil {
		return out, err // read again at the next poll, changed or not
	}
	r.recordsChanged = changed
	return out, nil
}

// record reads one record, unless its file is as last read. One removed
// meanwhile holds nothing.
func (r *Reader) record(id string) (cachedRecord, error) {
	last := r.records[id]
	mod, err := r.src.Records.Modified(id)
	if errors.Is(err, fs.ErrNotExist) {
		return cachedRecord{}, nil
	}
	if err != nil {
		return last, fmt.Errorf("record %s: %w", id, err)
	}
	if mod.Equal(last.mod) && last.holders != nil {
		return last, nil
	}
	rec, err := r.src.Records.Load(id)
	if errors.Is(err, fs.ErrNotExist) {
		return cachedRecord{}, nil
	}
	if err != nil {
		return last, fmt.Errorf("record %s: %w", id, err)
	}
	return cachedRecord{mod: mod, holders: recordHolders(rec, mod)}, nil
}

// recordHolders are the devices a record's attachments hold, by device ID.
func recordHolders(rec *attachmentapi.Record, mod time.Time) map[string]Holder {
	out := map[string]Holder{}
	for _, a := range rec.Attachments {
		if a.DeviceID == "" {
			continue
		}
		h := Holder{Kind: Container, Resource: a.Resource, Namespace: rec.PodNamespace, Name: rec.PodName,
			Container: rec.ContainerID, Since: mod.UTC().Truncate(time.Second), UID: a.Claim}
		if rec.PodUID != "" {
			h.PodUIDs = []string{rec.PodUID}
		}
		out[a.DeviceID] = h
	}
	return out
}
