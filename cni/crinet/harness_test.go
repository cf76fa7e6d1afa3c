package crinet_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/hwnet-io/hwnet/api/attachment"
	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

// harness is a Server on a real unix socket with a client dialled to it,
// the real CNI plugins and an attachment record store.
type harness struct {
	t       *testing.T
	dir     string
	bin     string
	confDir string
	socket  string
	records *attachments.Store
	client  crinetapi.RuntimeServiceClient
	store   *crinet.Store
	access  nodesocket.Access
	stop    func()
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return newHarnessIn(t, t.TempDir(), nodesocket.Access{})
}

// newHarnessIn serves from dir to the peers access admits.
func newHarnessIn(t *testing.T, dir string, access nodesocket.Access) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, bin: cniplugins.Dir(t), access: access}
	h.confDir = filepath.Join(h.dir, "net.d")
	h.socket = filepath.Join(h.dir, "run", "cri-network.sock")
	h.records = attachments.NewStore(filepath.Join(h.dir, "cni"))
	if err := os.MkdirAll(h.confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	h.start()
	t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
	return h
}

// start opens the store and serves it; restart stops and starts again.
func (h *harness) start() {
	h.t.Helper()
	v := crinet.Validator{BinDirs: []string{h.bin}}
	store, err := crinet.OpenStore(filepath.Join(h.dir, "networks"), v)
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = store
	srv := crinet.NewServer(crinet.Options{Store: store, Records: h.records, Fallback: h.fallback, Access: h.access})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, h.socket) }()
	sockdir.Await(h.t, h.socket, done)
	conn, err := grpc.NewClient("unix://"+h.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		h.t.Fatal(err)
	}
	h.client = crinetapi.NewRuntimeServiceClient(conn)
	h.stop = func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("Serve: %v", err)
		}
	}
}

func (h *harness) restart() {
	h.stop()
	h.stop = nil
	h.start()
}

// fallback finds the first configuration in confDir, as runtimes do.
func (h *harness) fallback() (string, *netconf.Delegate, error) {
	files, err := netconf.ConfigFiles(h.confDir, nil, ".conflist", ".conf", ".json")
	if err != nil || len(files) == 0 {
		return "", nil, os.ErrNotExist
	}
	dl, err := netconf.LoadFile(files[0])
	return files[0], dl, err
}

func (h *harness) ctx() context.Context {
	return h.t.Context()
}

// waitCall makes the first call wait for the socket to be served.
func (h *harness) set(cfg *crinetapi.NetworkConfig) (*crinetapi.NetworkConfig, error) {
	resp, err := h.client.SetPodNetwork(h.ctx(), &crinetapi.SetPodNetworkRequest{Config: cfg}, grpc.WaitForReady(true))
	return resp.GetConfig(), err
}

func (h *harness) mustSet(cfg *crinetapi.NetworkConfig) *crinetapi.NetworkConfig {
	h.t.Helper()
	got, err := h.set(cfg)
	if err != nil {
		h.t.Fatalf("SetPodNetwork: %v", err)
	}
	return got
}

func (h *harness) remove(namespace, name string, generation uint32) error {
	_, err := h.client.RemovePodNetwork(h.ctx(), &crinetapi.RemovePodNetworkRequest{
		Metadata: &crinetapi.NetworkMetadata{Namespace: namespace, Name: name, Generation: generation}}, grpc.WaitForReady(true))
	return err
}

func (h *harness) list() map[string]*crinetapi.PodNetworkResponse {
	h.t.Helper()
	resp, err := h.client.ListPodNetwork(h.ctx(), &crinetapi.ListPodNetworkRequest{}, grpc.WaitForReady(true))
	if err != nil {
		h.t.Fatalf("ListPodNetwork: %v", err)
	}
	m := map[string]*crinetapi.PodNetworkResponse{}
	for _, n := range resp.GetNetworks() {
		md := n.GetConfig().GetMetadata()
		key := md.GetName()
		if md.GetNamespace() != "" {
			key = md.GetNamespace() + "/" + key
		}
		m[key] = n
	}
	if len(resp.GetNetworks()) == 0 || resp.GetNetworks()[0].GetConfig().GetMetadata().GetName() != crinet.FallbackName {
		h.t.Errorf("ListPodNetwork: _fallback is not listed first")
	}
	return m
}

// recordPod saves an attachment record as the delegator does for a pod
// whose ADD attached it to network with the given result.
func (h *harness) recordPod(containerID, pod, network, result string) {
	h.t.Helper()
	rec := &attachment.Record{ContainerID: containerID, Netns: "/proc/self/ns/net", PodNamespace: "cnf", PodName: pod, PodUID: pod + "-uid",
		Attachments: []attachment.Attachment{
			{Network: "podnet", IfName: "eth0", Default: true, ConfList: json.RawMessage(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin"}]}`)},
			{Network: network, IfName: "net1", ConfList: json.RawMessage(`{"cniVersion":"1.0.0","name":"x","plugins":[{"type":"hwnet-test-plugin"}]}`)},
		}}
	if err := h.records.Save(rec); err != nil {
		h.t.Fatal(err)
	}
	rec.Attachments[0].Result = json.RawMessage(`{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/x"}],"ips":[{"address":"10.244.0.5/24","interface":0}]}`)
	rec.Attachments[1].Result = json.RawMessage(result)
	if err := h.records.AppendResults(rec); err != nil {
		h.t.Fatal(err)
	}
}

func code(err error) codes.Code { return grpcstatus.Code(err) }

// sriovNetwork is a valid managed network of the recorder plugin.
func sriovNetwork(namespace, name string) *crinetapi.NetworkConfig {
	return &crinetapi.NetworkConfig{
		Metadata: &crinetapi.NetworkMetadata{Name: name, Namespace: namespace,
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov_a"}},
		IpRanges: []*crinetapi.IPRange{{Cidr: "10.56.0.0/24"}},
		Cniv1Config: &crinetapi.CNIv1Config{CniVersion: "1.1.0", Plugins: []*crinetapi.CNIv1PluginConfig{{
			Type:         cniplugins.Recorder,
			Capabilities: []string{"ips", "mac"},
			Parameters:   map[string]string{"personality": "sriov", "ipam": `{"type":"static"}`, "vlan": "100"},
		}}},
	}
}
