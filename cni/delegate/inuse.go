package delegate

import (
	"errors"
	"sync"
	"time"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// recordedNetworks keeps the networks the attachment records name, which
// STATUS checks at every ask of the runtime: reading every record each
// time was most of a STATUS's own CPU with 100 pods. They are read again
// when the records directory's time moved (a record saved or removed:
// attachments.Store.Changed, which moves at every ask until the last
// change is settled).
type recordedNetworks struct {
	mu      sync.Mutex
	dir     string
	changed time.Time
	lists   []*netconf.Delegate
}

// get returns the distinct configuration lists, by name, of every
// attachment on record in dir. A record that cannot be read is an error,
// the readable ones' lists still returned; nothing is kept then.
func (r *recordedNetworks) get(c *call) ([]*netconf.Delegate, error) {
	changed, err := c.store.Changed()
	if err != nil {
		return nil, err
	}
	if lists, ok := r.kept(c.conf.CacheDir, changed); ok {
		return lists, nil
	}
	recs, err := records(c.store)
	var lists []*netconf.Delegate
	seen := map[string]bool{}
	for _, rec := range recs {
		for _, a := range rec.Attachments {
			l, lerr := attachments.Delegate(a)
			if lerr != nil || seen[l.Name] {
				continue
			}
			seen[l.Name] = true
			lists = append(lists, l)
		}
	}
	if err == nil {
		r.keep(c.conf.CacheDir, changed, lists)
	}
	return lists, err
}

func (r *recordedNetworks) kept(dir string, changed time.Time) ([]*netconf.Delegate, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lists, r.dir == dir && !r.changed.IsZero() && r.changed.Equal(changed)
}

func (r *recordedNetworks) keep(dir string, changed time.Time, lists []*netconf.Delegate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dir, r.changed, r.lists = dir, changed, lists
}

// records loads every container record; unreadable ones are reported
// together, the readable ones still returned.
func records(store *attachments.Store) ([]*attachmentapi.Record, error) {
	ids, err := store.List()
	if err != nil {
		return nil, err
	}
	var recs []*attachmentapi.Record
	var errs []error
	for _, id := range ids {
		rec, err := store.Load(id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, rec)
	}
	return recs, errors.Join(errs...)
}
