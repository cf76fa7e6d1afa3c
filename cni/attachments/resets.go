package attachments

import (
	"time"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// LeaveReset leaves the reset of the VF settings r records pending under
// the store (api/vfreset), for the agent to perform: the device ledger
// withholds the VF from every pool until it is done. The teardown calls
// it before it removes the record, so the VF is never free in between.
func (s *Store) LeaveReset(r vfsettings.Record, reason string) error {
	return vfreset.Leave(vfreset.Dir(s.dir), &vfreset.Pending{Record: r, Reason: reason, Since: time.Now().UTC().Truncate(time.Second)})
}
