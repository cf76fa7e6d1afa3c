package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// Addresses on the default virtual node.
const (
	pf0      = "0000:3b:00.0" // E810-C, NUMA 0, enp59s0f0
	pf1      = "0000:3e:00.0" // E810-C, NUMA 1, enp62s0f0
	ibPF     = "0000:41:00.0" // ConnectX-6 InfiniBand, NUMA 0
	netVF    = "0000:3b:01.0" // VF 0 of pf0, iavf
	vfioVF   = "0000:3b:01.6" // VF 6 of pf0, vfio-pci
	vfioVF1  = "0000:3b:01.7"
	ibVF     = "0000:41:01.0" // VF 0 of ibPF, mlx5_core with RDMA
	ibVF1    = "0000:41:01.1"
	vdpaVF   = "0000:3e:01.0" // VF 0 of pf1, given a vhost-vdpa device
	uioVF    = "0000:3e:01.5" // VF 5 of pf1, bound to uio_pci_generic: /dev/uio0
	vdpaName = "vdpa0"
)

// testNode is the default virtual node (a sysfs tree, no links) and what
// discovery found on it.
type testNode struct {
	node *virtualnode.Node
	inv  *discovery.Inventory
}

// newTestNode builds and discovers the default node; vdpaVF gets a
// vhost-vdpa device whose node is under the tree's /dev, and uioVF is
// bound to uio_pci_generic.
func newTestNode(t testing.TB) *testNode {
	t.Helper()
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), db, false)
	if err := node.BindDriver(context.Background(), uioVF, "uio_pci_generic"); err != nil {
		t.Fatal(err)
	}
	vdpaPath := filepath.Join(node.DevRoot(), "vhost-vdpa-0")
	inv, err := discovery.Discover(context.Background(), discovery.Options{
		SysfsRoot: node.SysRoot(),
		DevRoot:   node.DevRoot(),
		DB:        db,
		ESwitch:   vnodetest.NoESwitch{},
		VDPA: vnodetest.VDPA{{Parent: vdpaVF, VDPADevice: discovery.VDPADevice{
			Name: vdpaName, Driver: "vhost_vdpa", Path: vdpaPath,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &testNode{node: node, inv: inv}
}

// devices turns the VFs of the PFs at pfs into pool devices, all healthy,
// as the pool matcher would.
func (n *testNode) devices(t testing.TB, pfs ...string) []offer.State {
	t.Helper()
	var out []offer.State
	for _, pf := range n.inv.PFs {
		if !slices.Contains(pfs, pf.Address) {
			continue
		}
		for _, vf := range pf.VFs {
			d := pools.Device{ID: vf.Address, Function: &vf.Function, PF: pf.Address, VFIndex: vf.Index, Representor: vf.Representor}
			if pf.Netdev != nil {
				d.PFName = pf.Netdev.Name
			}
			out = append(out, offer.State{Device: d, Healthy: true})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no VFs on %v", pfs)
	}
	return out
}

// device returns the pool device of one VF.
func (n *testNode) device(t testing.TB, addr string) offer.State {
	t.Helper()
	for _, pf := range n.inv.PFs {
		for _, d := range n.devices(t, pf.Address) {
			if d.ID == addr {
				return d
			}
		}
	}
	t.Fatalf("%s is not a VF of the node", addr)
	return offer.State{}
}

// edited returns d with a copy of its function changed by edit: pool
// devices share their functions with the inventory, which is immutable.
func edited(d offer.State, edit func(*discovery.Function)) offer.State {
	fn := *d.Function
	edit(&fn)
	d.Function = &fn
	return d
}

// tmpfsDir is a directory on a tmpfs, where production keeps device
// information files, or t.TempDir when there is none to write to.
func tmpfsDir(t testing.TB) string {
	t.Helper()
	var fs unix.Statfs_t
	if unix.Statfs("/dev/shm", &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
		if dir, err := os.MkdirTemp("/dev/shm", "hwnet-dp-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// testKubelet serves kubelet's Registration service on a real socket and
// records the requests.
type testKubelet struct {
	pluginapi.UnimplementedRegistrationServer
	socket   string
	requests chan *pluginapi.RegisterRequest
	srv      *grpc.Server
}

func startKubelet(t testing.TB, socket string) *testKubelet {
	t.Helper()
	lis, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	k := &testKubelet{socket: socket, requests: make(chan *pluginapi.RegisterRequest, 16), srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(k.srv, k)
	var wg sync.WaitGroup
	wg.Go(func() { k.srv.Serve(lis) })
	t.Cleanup(func() { k.srv.Stop(); wg.Wait() })
	return k
}

func (k *testKubelet) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	k.requests <- req
	return &pluginapi.Empty{}, nil
}

// nextRegistration waits for a Register call.
func (k *testKubelet) nextRegistration(t testing.TB) *pluginapi.RegisterRequest {
	t.Helper()
	select {
	case req := <-k.requests:
		return req
	case <-time.After(10 * time.Second):
		t.Fatal("no registration within 10s")
		return nil
	}
}

// harness is a plugin run by Run in a plugin directory with a test kubelet.
type harness struct {
	plugin     *Plugin
	kubelet    *testKubelet
	registered *pluginapi.RegisterRequest // the first registration
	dir        string
	done       chan error
}

// openLedger is a device ledger with no source: every device free until
// a Reserve holds it.
func openLedger(t testing.TB) *ledger.Book {
	t.Helper()
	b := ledger.NewBook(ledger.BookOptions{})
	b.Judge(ledger.Verdicts{})
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	return b
}

// startHarness runs the plugin of res with devices; opts.PluginDir and
// opts.DevinfoDir are set to new directories.
func startHarness(t testing.TB, res pools.Resource, opts Options, devices []offer.State) *harness {
	t.Helper()
	dir := sockdir.New(t)
	h := &harness{dir: dir, kubelet: startKubelet(t, filepath.Join(dir, "kubelet.sock")), done: make(chan error, 1)}
	opts.PluginDir, opts.DevinfoDir = dir, filepath.Join(dir, "devinfo")
	if opts.Ledger == nil {
		opts.Ledger = openLedger(t)
	}
	h.plugin = New(res, opts)
	h.plugin.SetDevices(devices)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { h.done <- h.plugin.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-h.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	// Like kubelet, connect only once the plugin has registered.
	h.registered = h.kubelet.nextRegistration(t)
	return h
}

// client dials the plugin's socket as kubelet does.
func (h *harness) client(t testing.TB) pluginapi.DevicePluginClient {
	t.Helper()
	conn, err := grpc.NewClient("unix:"+h.plugin.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// listAndWatch opens a ListAndWatch stream whose messages arrive on the channel.
func listAndWatch(t testing.TB, c pluginapi.DevicePluginClient) <-chan []*pluginapi.Device {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	lists := make(chan []*pluginapi.Device, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			resp, err := stream.Recv()
			if err != nil {
				close(lists)
				return
			}
			lists <- resp.Devices
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return lists
}

func nextList(t testing.TB, lists <-chan []*pluginapi.Device) []*pluginapi.Device {
	t.Helper()
	select {
	case l, ok := <-lists:
		if !ok {
			t.Fatal("ListAndWatch stream ended")
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no ListAndWatch message within 10s")
		return nil
	}
}
