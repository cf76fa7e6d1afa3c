package server_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/test/asuser"
)

// TestMain turns the test binary, re-run by asuser as another user, into
// a shim sending one STATUS to the socket named by its first argument.
func TestMain(m *testing.M) {
	if asuser.Mode() == "cni" {
		os.Exit(shimClient(os.Args[1]))
	}
	os.Exit(m.Run())
}

func shimClient(socket string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := wire.NewClient(socket).Do(ctx, request(wire.CommandStatus))
	if err == nil && resp.Error != nil {
		err = resp.Error
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return asuser.Outcome(err)
}
