package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/sockdir"
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

// TestSocketCheckTakesARecentAnswerForProof: the readiness check of the
// CNI socket does not ask the socket while a request was answered there
// within answerFresh (kubelet's probe comes every 5 s, the runtime's
// STATUS too); without one it asks, and fails when the socket is gone.
func TestSocketCheckTakesARecentAnswerForProof(t *testing.T) {
	for _, tc := range []struct {
		name     string
		answered bool
		ready    bool
	}{{"a request answered a moment ago", true, true}, {"none answered", false, false}} {
		t.Run(tc.name, func(t *testing.T) {
			socket := filepath.Join(sockdir.New(t), "cni.sock")
			srv := server.New(answer{}, nil, nodesocket.Access{})
			ctx, cancel := context.WithCancel(context.Background())
			served := make(chan error, 1)
			go func() { served <- srv.Serve(ctx, socket) }()
			t.Cleanup(func() { cancel(); <-served })
			sockdir.Await(t, socket, served)
			if tc.answered {
				req := &wire.Request{Command: wire.CommandStatus, Config: json.RawMessage(`{"cniVersion":"1.1.0","name":"hwnet","type":"hwnet"}`)}
				if _, err := wire.NewClient(socket).Do(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Remove(socket); err != nil {
				t.Fatal(err)
			}
			err := socketCheck(srv, socket)(ctx)
			if (err == nil) != tc.ready {
				t.Errorf("check with the socket gone: %v, want ready %v", err, tc.ready)
			}
		})
	}
}
