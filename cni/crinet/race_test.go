package crinet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/wire"
)

// dial is one more client of the harness's socket, its own connection.
func (h *harness) dial() crinetapi.RuntimeServiceClient {
	h.t.Helper()
	conn, err := grpc.NewClient("unix://"+h.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { conn.Close() })
	return crinetapi.NewRuntimeServiceClient(conn)
}

// TestCRINet_RefusedRemoveIsInvisible: while clients keep asking to remove
// a network pods use, which is refused every time, no List by any other
// client ever misses it and no ADD's lookup fails to find it: a refused
// Remove changes nothing anyone sees.
func TestCRINet_RefusedRemoveIsInvisible(t *testing.T) {
	h := newHarness(t)
	h.mustSet(sriovNetwork("cnf", "sriov-a"))
	h.recordPod("c1", "pod-1", "cnf/sriov-a", `{"cniVersion":"1.1.0","interfaces":[{"name":"net1","sandbox":"/x"}],"ips":[{"address":"10.56.0.10/24","interface":0}]}`)
	const clients, rounds = 8, 150
	errs := make(chan error, clients+1)
	var wg sync.WaitGroup
	for i := range clients {
		client := h.dial()
		wg.Go(func() {
			for range rounds {
				if err := removeOrList(h.ctx(), client, i%2 == 0); err != nil {
					errs <- fmt.Errorf("client %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Go(func() {
		// An ADD's lookup, held by Attaching as the agent's ADDs are.
		lookup := crinet.Attaching{Next: handlerFunc(func(ctx context.Context, _ *wire.Request) (json.RawMessage, error) {
			_, err := crinet.NADs{Store: h.store}.NAD(ctx, "cnf", "sriov-a")
			return nil, err
		})}
		for range rounds * clients / 2 {
			if _, err := lookup.Handle(h.ctx(), &wire.Request{}); err != nil {
				errs <- fmt.Errorf("an ADD's lookup: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// removeOrList asks to remove cnf/sriov-a, which must be refused as in
// use, or lists the networks, which must include it.
func removeOrList(ctx context.Context, client crinetapi.RuntimeServiceClient, remove bool) error {
	if remove {
		_, err := client.RemovePodNetwork(ctx, &crinetapi.RemovePodNetworkRequest{
			Metadata: &crinetapi.NetworkMetadata{Namespace: "cnf", Name: "sriov-a"}}, grpc.WaitForReady(true))
		if code(err) != codes.FailedPrecondition {
			return fmt.Errorf("RemovePodNetwork of a network in use: got %v, want FailedPrecondition", err)
		}
		return nil
	}
	resp, err := client.ListPodNetwork(ctx, &crinetapi.ListPodNetworkRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("ListPodNetwork: %w", err)
	}
	for _, n := range resp.GetNetworks() {
		if md := n.GetConfig().GetMetadata(); md.GetNamespace() == "cnf" && md.GetName() == "sriov-a" {
			return nil
		}
	}
	return fmt.Errorf("ListPodNetwork omits cnf/sriov-a, which was never removed: %d networks", len(resp.GetNetworks()))
}

type handlerFunc func(context.Context, *wire.Request) (json.RawMessage, error)

func (f handlerFunc) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	return f(ctx, req)
}
