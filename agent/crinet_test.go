package agent_test

import (
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

// The agent serves the CRI network API on --cri-network-socket, mode
// 0600, with the networks of --cri-network-dir, which a restarted agent
// serves again; _fallback follows the CNI configuration directory.
func TestCRINet_AgentServesNetworkAPI(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig)
	apiServer := kubeapi.Start(t)
	apiServer.ApplyCRD(t, "../deploy/crds/network-attachment-definition.yaml")
	dir := sockdir.New(t)
	socket := filepath.Join(dir, "cri-network.sock")
	f.opts.CNI = &daemon.Options{
		ConfDir: filepath.Join(dir, "net.d"), SocketPath: filepath.Join(dir, "cni.sock"), CacheDir: filepath.Join(dir, "cache"),
		DevinfoDir: filepath.Join(dir, "cni-devinfo"), NodeName: "node-1",
		PodsAPISocket: filepath.Join(dir, "no-pods-api.sock"), REST: apiServer.Config(), BinDir: cniplugins.Dir(t),
		NetworkAPISocket: socket, NetworkDir: filepath.Join(dir, "networks"),
	}
	f.start(t)
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := crinetapi.NewRuntimeServiceClient(conn)
	cfg := &crinetapi.NetworkConfig{Metadata: &crinetapi.NetworkMetadata{Name: "net-a"}, Cniv1Config: &crinetapi.CNIv1Config{
		CniVersion: "1.0.0", Plugins: []*crinetapi.CNIv1PluginConfig{{Type: cniplugins.Recorder}}}}
	if _, err := client.SetPodNetwork(t.Context(), &crinetapi.SetPodNetworkRequest{Config: cfg}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("SetPodNetwork: %v", err)
	}
	if fi, err := os.Stat(socket); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, mode %v; want 0600", err, fi.Mode())
	}
	f.stop(t)
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("socket left after the agent stopped: %v", err)
	}
	f.start(t)
	resp, err := client.ListPodNetwork(t.Context(), &crinetapi.ListPodNetworkRequest{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("ListPodNetwork after a restart: %v", err)
	}
	nets := resp.GetNetworks()
	if len(nets) != 2 || nets[0].GetConfig().GetMetadata().GetName() != crinet.FallbackName ||
		nets[0].GetStatus().GetSandboxManagement() || nets[1].GetConfig().GetMetadata().GetName() != "net-a" ||
		!nets[1].GetStatus().GetConnectivity() {
		t.Errorf("after a restart: %v; want _fallback (not ready: no configuration) and net-a", nets)
	}
}
