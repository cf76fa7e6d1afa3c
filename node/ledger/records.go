package ledger

import (
	"context"
	"time"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
)

// containers are the devices the CNI attachment records hold. The records
// are listed again only when the set changed, and a record decoded again
// only when its file changed; one that cannot be read holds what it held
// when last read (nothing, if never).
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
	r.recordsChanged = changed
	next := make(map[string]cachedRecord, len(ids))
	out := map[string][]Holder{}
	for _, id := range ids {
		c := r.record(id)
		next[id] = c
		for dev, h := range c.holders {
			out[dev] = append(out[dev], h)
		}
	}
	r.records = next
	return out, nil
}

func (r *Reader) record(id string) cachedRecord {
	last := r.records[id]
	mod, err := r.src.Records.Modified(id)
	if err != nil || mod.Equal(last.mod) {
		return last
	}
	rec, err := r.src.Records.Load(id)
	if err != nil {
		return last
	}
	return cachedRecord{mod: mod, holders: recordHolders(rec, mod)}
}

// recordHolders are the devices a record's attachments hold, by device ID.
func recordHolders(rec *attachmentapi.Record, mod time.Time) map[string]Holder {
	out := map[string]Holder{}
	for _, a := range rec.Attachments {
		if a.DeviceID == "" {
			continue
		}
		h := Holder{Kind: Container, Resource: a.Resource, Namespace: rec.PodNamespace, Name: rec.PodName,
			Container: rec.ContainerID, Since: mod.UTC().Truncate(time.Second)}
		if rec.PodUID != "" {
			h.PodUIDs = []string{rec.PodUID}
		}
		out[a.DeviceID] = h
	}
	return out
}
