package daemon

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/metrics"
)

// measuredHandler records each CNI request's latency and result, and
// says when one that may have changed the attachment records ended (done,
// may be nil).
type measuredHandler struct {
	next    server.Handler
	metrics *metrics.Metrics
	done    func()
}

func (h measuredHandler) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	start := time.Now()
	res, err := h.next.Handle(ctx, req)
	h.metrics.ObserveCNI(req.Command, time.Since(start), err)
	if h.done != nil && changesRecords(req.Command) {
		h.done()
	}
	return res, err
}

// changesRecords tells the commands that save or remove attachment
// records, failed or not. CHECK and STATUS read them: the runtime's STATUS
// comes every 5 s, and each would have the device ledger read its sources.
func changesRecords(command string) bool {
	switch command {
	case wire.CommandAdd, wire.CommandDel, wire.CommandGC:
		return true
	}
	return false
}
