package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/metrics"
)

// answer is a CNI handler that answers every request with err.
type answer struct{ err error }

func (a answer) Handle(context.Context, *wire.Request) (json.RawMessage, error) { return nil, a.err }

// TestServedFollowsTheCommandsThatChangeRecords: the device ledger is told
// after each ADD, DEL and GC, which save or remove attachment records,
// failed or not, and not after CHECK and STATUS, which only read them (the
// runtime's STATUS comes every 5 s).
func TestServedFollowsTheCommandsThatChangeRecords(t *testing.T) {
	for _, tc := range []struct {
		command string
		told    bool
	}{
		{wire.CommandAdd, true}, {wire.CommandDel, true}, {wire.CommandGC, true},
		{wire.CommandCheck, false}, {wire.CommandStatus, false},
	} {
		for _, err := range []error{nil, errors.New("failed")} {
			served := 0
			h := measuredHandler{next: answer{err}, metrics: metrics.New(), done: func() { served++ }}
			if _, got := h.Handle(context.Background(), &wire.Request{Command: tc.command}); !errors.Is(got, err) {
				t.Fatalf("%s: error %v, want %v", tc.command, got, err)
			}
			if told := served == 1; told != tc.told || served > 1 {
				t.Errorf("%s (error %v): ledger told %d times, want told: %v", tc.command, err, served, tc.told)
			}
		}
	}
}
