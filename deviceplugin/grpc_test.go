package deviceplugin

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/test/fdtest"
	"github.com/hwnet-io/hwnet/test/logtest"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

var sriovNet = pools.Resource{Prefix: "intel.com", Name: "sriov_net"}

func TestRunRegistersWithKubelet(t *testing.T) {
	n := newTestNode(t)
	h := startHarness(t, sriovNet, Options{}, n.devices(t, pf0))
	req := h.registered
	want := &pluginapi.RegisterRequest{
		Version:      "v1beta1",
		Endpoint:     "intel.com_sriov_net.sock",
		ResourceName: "intel.com/sriov_net",
		Options:      &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}
	if req.Version != want.Version || req.Endpoint != want.Endpoint || req.ResourceName != want.ResourceName ||
		req.Options.GetGetPreferredAllocationAvailable() != true || req.Options.GetPreStartRequired() {
		t.Errorf("Register request %v, want %v", req, want)
	}
	if _, err := os.Stat(filepath.Join(h.dir, req.Endpoint)); err != nil {
		t.Errorf("the endpoint kubelet was given is not in its directory: %v", err)
	}
	c := h.client(t)
	opts, err := c.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if !opts.GetPreferredAllocationAvailable || opts.PreStartRequired {
		t.Errorf("GetDevicePluginOptions = %v, want preferred allocation and no PreStartContainer", opts)
	}
	if _, err := c.PreStartContainer(context.Background(), &pluginapi.PreStartContainerRequest{DevicesIds: []string{netVF}}); err != nil {
		t.Errorf("PreStartContainer: %v", err)
	}
}

// listed is each device as kubelet sees it: "<id> <health> <numa>".
func listed(devs []*pluginapi.Device) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.ID + " " + d.Health + " " + numaString(d)
	}
	return out
}

func numaString(d *pluginapi.Device) string {
	if d.Topology == nil {
		return "none"
	}
	var nodes []string
	for _, n := range d.Topology.Nodes {
		nodes = append(nodes, strconv.FormatInt(n.ID, 10))
	}
	return "numa" + strings.Join(nodes, ",")
}

func wantListed(devs []offer.State, health map[string]string, numa string) []string {
	out := make([]string, len(devs))
	for i, d := range devs {
		out[i] = d.ID + " " + cmp.Or(health[d.ID], "Healthy") + " " + numa
	}
	return out
}

func TestListAndWatch(t *testing.T) {
	n := newTestNode(t)
	numa0, numa1 := n.devices(t, pf0), n.devices(t, pf1)
	h := startHarness(t, sriovNet, Options{}, numa0)
	lists := listAndWatch(t, h.client(t))
	if got, want := listed(nextList(t, lists)), wantListed(numa0, nil, "numa0"); !slices.Equal(got, want) {
		t.Fatalf("first list\n got %v\nwant %v", got, want)
	}

	sick := slices.Clone(numa0)
	sick[0].Healthy, sick[0].Reason = false, "link down"
	h.plugin.SetDevices(sick)
	if got, want := listed(nextList(t, lists)), wantListed(numa0, map[string]string{netVF: "Unhealthy"}, "numa0"); !slices.Equal(got, want) {
		t.Fatalf("after a health flip\n got %v\nwant %v", got, want)
	}

	// Nothing kubelet sees changes: no message. The next real change is
	// the next message.
	calm := slices.Clone(sick)
	calm[0].Reason = "no carrier"
	h.plugin.SetDevices(calm)
	both := append(slices.Clone(numa0), numa1...)
	h.plugin.SetDevices(both)
	if got, want := listed(nextList(t, lists)), append(wantListed(numa0, nil, "numa0"), wantListed(numa1, nil, "numa1")...); !slices.Equal(got, want) {
		t.Fatalf("after adding devices\n got %v\nwant %v", got, want)
	}

	h.plugin.SetDevices(numa1)
	if got, want := listed(nextList(t, lists)), wantListed(numa1, nil, "numa1"); !slices.Equal(got, want) {
		t.Fatalf("after removing devices\n got %v\nwant %v", got, want)
	}

	moved := slices.Clone(numa1)
	for i := range moved {
		moved[i] = edited(moved[i], func(fn *discovery.Function) { fn.NUMANode = 0 })
	}
	h.plugin.SetDevices(moved)
	if got, want := listed(nextList(t, lists)), wantListed(numa1, nil, "numa0"); !slices.Equal(got, want) {
		t.Fatalf("after a NUMA change\n got %v\nwant %v", got, want)
	}

	// A stream opened now starts with the current list.
	if got, want := listed(nextList(t, listAndWatch(t, h.client(t)))), wantListed(numa1, nil, "numa0"); !slices.Equal(got, want) {
		t.Errorf("a new stream's first list\n got %v\nwant %v", got, want)
	}
	if got := h.plugin.Devices(); !reflect.DeepEqual(got, moved) {
		t.Errorf("Devices() = %v, want the last SetDevices list", got)
	}
}

func TestListAndWatchTopology(t *testing.T) {
	n := newTestNode(t)
	unknown := edited(n.device(t, netVF), func(fn *discovery.Function) { fn.NUMANode = -1 })
	tests := []struct {
		name    string
		exclude bool
		dev     offer.State
		want    string
	}{
		{"NUMA node", false, n.device(t, netVF), "numa0"},
		{"excludeTopology", true, n.device(t, netVF), "none"},
		{"unknown NUMA node", false, unknown, "none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := sriovNet
			res.ExcludeTopology = tt.exclude
			h := startHarness(t, res, Options{}, []offer.State{tt.dev})
			if got := numaString(nextList(t, listAndWatch(t, h.client(t)))[0]); got != tt.want {
				t.Errorf("topology %s, want %s", got, tt.want)
			}
		})
	}
}

func TestZeroDevicePoolRegistersAndListsNothing(t *testing.T) {
	h := startHarness(t, sriovNet, Options{}, nil)
	if req := h.registered; req.ResourceName != "intel.com/sriov_net" {
		t.Errorf("registered %q", req.ResourceName)
	}
	if got := nextList(t, listAndWatch(t, h.client(t))); len(got) != 0 {
		t.Errorf("first list of an empty pool: %v", got)
	}
}

func TestAllocateOverGRPC(t *testing.T) {
	n := newTestNode(t)
	var logs logtest.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	h := startHarness(t, sriovNet, Options{DevRoot: n.node.DevRoot(), Logger: logger}, n.devices(t, pf0))
	resp, err := h.client(t).Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vfioVF}}, {DevicesIds: []string{netVF}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ContainerResponses) != 2 {
		t.Fatalf("%d container responses for 2 requests", len(resp.ContainerResponses))
	}
	first, second := resp.ContainerResponses[0], resp.ContainerResponses[1]
	if got, want := specsOf(first), []spec{rw("/dev/vfio/vfio"), rw("/dev/vfio/8")}; !reflect.DeepEqual(got, want) {
		t.Errorf("first container's devices %v, want %v", got, want)
	}
	if got := first.Envs["PCIDEVICE_INTEL_COM_SRIOV_NET"]; got != vfioVF {
		t.Errorf("first container's PCIDEVICE_INTEL_COM_SRIOV_NET = %q", got)
	}
	if got := second.Envs["PCIDEVICE_INTEL_COM_SRIOV_NET_INFO"]; got != `{"0000:3b:01.0":{"generic":{"deviceID":"0000:3b:01.0"}}}` {
		t.Errorf("second container's _INFO = %q", got)
	}
	if len(second.Devices) != 0 {
		t.Errorf("a netdev VF got device nodes %v", specsOf(second))
	}
	files, err := devinfo.List(filepath.Join(h.dir, "devinfo"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		if f.Belongs("intel.com/sriov_net") {
			got = append(got, f.DeviceID)
		}
	}
	if want := []string{netVF, vfioVF}; !slices.Equal(got, want) {
		t.Errorf("device info files for %v, want %v", got, want)
	}

	// One line for the registration (logged once kubelet has answered),
	// one for the allocation with what the pod sees.
	waitForLog(t, &logs, "registered with kubelet")
	var allocated []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "msg=allocated") {
			allocated = append(allocated, line)
		}
	}
	if len(allocated) != 1 || !strings.Contains(allocated[0], vfioVF) || !strings.Contains(allocated[0], "/dev/vfio/8") ||
		!strings.Contains(allocated[0], "resource=intel.com/sriov_net") {
		t.Errorf("allocation log lines:\n%s", logs.String())
	}

	_, err = h.client(t).Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{ibVF}}},
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), ibVF) {
		t.Errorf("Allocate of a device of another pool: %v, want InvalidArgument naming %s", err, ibVF)
	}
}

func TestGetPreferredAllocationOverGRPC(t *testing.T) {
	n := newTestNode(t)
	devices := append(n.devices(t, pf0), n.devices(t, pf1)...)
	var all []string
	for _, d := range devices {
		all = append(all, d.ID)
	}
	slices.Reverse(all) // kubelet's order is a set's
	h := startHarness(t, sriovNet, Options{}, devices)
	c := h.client(t)
	resp, err := c.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: all, AllocationSize: 2},
			{AvailableDeviceIDs: all, MustIncludeDeviceIDs: []string{"0000:3e:01.3"}, AllocationSize: 2},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"0000:3b:01.0", "0000:3b:01.1"}, {"0000:3e:01.0", "0000:3e:01.3"}}
	for i, c := range resp.ContainerResponses {
		if !slices.Equal(c.DeviceIDs, want[i]) {
			t.Errorf("container %d: preferred %v, want %v", i, c.DeviceIDs, want[i])
		}
	}
	_, err = c.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
		ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: all[:2], AllocationSize: 3}},
	})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "only 2 are available") {
		t.Errorf("impossible request: %v, want InvalidArgument saying why", err)
	}
}

// TestRunServesAgainAfterKubeletRestart plays a kubelet restart: kubelet
// stops, deletes every socket in its directory and starts again. The
// plugin must serve again and register with the new kubelet.
func TestRunServesAgainAfterKubeletRestart(t *testing.T) {
	n := newTestNode(t)
	h := startHarness(t, sriovNet, Options{}, n.devices(t, pf0))
	old := listAndWatch(t, h.client(t))
	nextList(t, old)

	h.kubelet.srv.Stop()
	if err := os.Remove(h.plugin.SocketPath()); err != nil {
		t.Fatal(err)
	}
	kubelet := startKubelet(t, h.kubelet.socket)
	if req := kubelet.nextRegistration(t); req.Endpoint != "intel.com_sriov_net.sock" {
		t.Errorf("registered again with endpoint %q", req.Endpoint)
	}
	if _, ok := <-old; ok {
		t.Error("the stream of the deleted socket got another list instead of ending")
	}
	if got := nextList(t, listAndWatch(t, h.client(t))); len(got) != 8 {
		t.Errorf("the new socket lists %d devices, want 8", len(got))
	}
}

// TestRunServesOnceItCan: a plugin that cannot watch its directory or
// listen at start (a node out of inotify instances or descriptors) tries
// again and registers once it can. Run gave up, and the pool was gone from
// kubelet until the agent restarted.
func TestRunServesOnceItCan(t *testing.T) {
	n := newTestNode(t)
	dir := sockdir.New(t)
	kubelet := startKubelet(t, filepath.Join(dir, "kubelet.sock"))
	var logs logtest.Buffer
	p := New(sriovNet, Options{PluginDir: dir, DevinfoDir: filepath.Join(dir, "devinfo"), Ledger: openLedger(t),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.SetDevices(n.devices(t, pf0))
	ended := fdtest.Starve(t, &logs, p.Run)
	if done, err := ended(); done {
		t.Fatalf("Run returned %v when it could not serve; want it to try again", err)
	}
	if req := kubelet.nextRegistration(t); req.ResourceName != "intel.com/sriov_net" {
		t.Errorf("registered %q", req.ResourceName)
	}
}

func TestServe(t *testing.T) {
	dir := sockdir.New(t)
	p := New(sriovNet, Options{PluginDir: filepath.Join(dir, "plugins")})
	socket := p.SocketPath()
	if want := filepath.Join(dir, "plugins", "intel.com_sriov_net.sock"); socket != want {
		t.Fatalf("SocketPath() = %s, want %s", socket, want)
	}
	// A stale file in the way (a crashed earlier agent) is replaced.
	if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(socket, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- p.Serve(ctx) }()
	sockdir.Await(t, socket, served)
	if err := p.Serve(ctx); err == nil || !strings.Contains(err.Error(), "already serving") {
		t.Errorf("a second Serve: %v, want an error", err)
	}

	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	if err := waitFor(t, served); !errors.Is(err, ErrSocketRemoved) {
		t.Fatalf("Serve after its socket was deleted: %v, want ErrSocketRemoved", err)
	}

	go func() { served <- p.Serve(ctx) }()
	sockdir.Await(t, socket, served)
	cancel()
	if err := waitFor(t, served); err != nil {
		t.Fatalf("Serve after ctx was done: %v", err)
	}
	if _, err := os.Lstat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestServeRejectsLongSocketPath(t *testing.T) {
	p := New(sriovNet, Options{PluginDir: "/tmp/" + strings.Repeat("d", 100)})
	err := p.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "more than the 107 a unix socket takes") {
		t.Fatalf("Serve: %v, want an error about the path's length", err)
	}
}

func TestRegisterWithoutKubelet(t *testing.T) {
	dir := sockdir.New(t)
	p := New(sriovNet, Options{PluginDir: dir})
	err := p.Register(context.Background())
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "kubelet.sock")) {
		t.Fatalf("Register: %v, want an error naming kubelet's socket", err)
	}
}

func waitFor(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s")
		return nil
	}
}

// TestConcurrentClients has several kubelet connections watch and
// allocate at once while the device list changes; run with -race.
func TestConcurrentClients(t *testing.T) {
	n := newTestNode(t)
	devices := n.devices(t, pf0)
	h := startHarness(t, sriovNet, Options{DevRoot: n.node.DevRoot()}, devices)
	var streams []<-chan []*pluginapi.Device
	for range 4 {
		lists := listAndWatch(t, h.client(t))
		nextList(t, lists)
		streams = append(streams, lists)
	}
	errs := make(chan error, 8)
	for i := range 8 {
		c := h.client(t)
		go func() {
			_, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vfioVF, devices[i%6].ID}}},
			})
			errs <- err
		}()
	}
	list := devices
	for i := 1; i <= 3; i++ {
		list = slices.Clone(list) // the plugin keeps the list it was given
		list[i].Healthy = false
		h.plugin.SetDevices(list)
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	// Updates may merge, but every stream gets to the last list, the only
	// one with devices 1 to 3 unhealthy.
	last := wantListed(devices[:4], map[string]string{
		devices[1].ID: "Unhealthy", devices[2].ID: "Unhealthy", devices[3].ID: "Unhealthy",
	}, "numa0")
	for _, lists := range streams {
		for !slices.Equal(listed(nextList(t, lists))[:4], last) {
		}
	}
}

// TestKubeletStartedRetriesAtOnce starts kubelet after the plugin's first
// registration failed; KubeletStarted must not wait for the next retry,
// here an hour away.
func TestKubeletStartedRetriesAtOnce(t *testing.T) {
	p, dir := runUnregistered(t)
	kubelet := startKubelet(t, filepath.Join(dir, "kubelet.sock"))
	p.KubeletStarted()
	if req := kubelet.nextRegistration(t); req.ResourceName != "intel.com/sriov_net" {
		t.Errorf("registered %q", req.ResourceName)
	}
}

// runUnregistered runs a plugin, until the test ends, whose first
// registration failed for want of kubelet and whose next retry is an hour
// away; dir is its plugin directory.
func runUnregistered(t *testing.T) (*Plugin, string) {
	t.Helper()
	dir := sockdir.New(t)
	var logs logtest.Buffer
	p := New(sriovNet, Options{PluginDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.firstRetry, p.maxRetry = time.Hour, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitForLog(t, &logs, "registration failed")
	return p, dir
}

// waitForLog waits until logs has a line with text.
func waitForLog(t *testing.T, logs *logtest.Buffer, text string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), text); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within 10s:\n%s", text, logs.String())
		}
	}
}

// TestRegisteredTracksKubelet: the agent's readiness needs to know that
// kubelet accepted the pool, and that it must again after kubelet deleted
// the socket.
func TestRegisteredTracksKubelet(t *testing.T) {
	p, dir := runUnregistered(t)
	if p.Registered() {
		t.Fatal("Registered before kubelet answered")
	}
	kubelet := startKubelet(t, filepath.Join(dir, "kubelet.sock"))
	p.KubeletStarted()
	kubelet.nextRegistration(t)
	waitUntil(t, "Registered after kubelet accepted", p.Registered)
	kubelet.srv.Stop()
	if err := os.Remove(p.SocketPath()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "not Registered once kubelet deleted the socket", func() bool { return !p.Registered() })
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not %s within 10s", what)
		}
	}
}
