package crinet_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/test/asuser"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// TestMain turns the test binary, re-run by asuser as another user, into
// a runtime setting the network cnf/intruder through the socket named by
// its first argument; else it runs the tests, an API server reused
// between them (kubeapi.MainCode).
func TestMain(m *testing.M) {
	if asuser.Mode() == "set" {
		os.Exit(setClient(os.Args[1]))
	}
	os.Exit(kubeapi.MainCode(m))
}

func setClient(socket string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	// Without WaitForReady: a connection refused or closed unanswered
	// fails the call at once, as Unavailable.
	_, err = crinetapi.NewRuntimeServiceClient(conn).SetPodNetwork(ctx,
		&crinetapi.SetPodNetworkRequest{Config: sriovNetwork("cnf", "intruder")})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	switch code(err) {
	case codes.OK:
		return asuser.Answered
	case codes.Unavailable:
		return asuser.Refused
	}
	return 1
}
