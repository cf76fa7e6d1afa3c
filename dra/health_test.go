package dra_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// healthStream opens kubelet's health stream (KEP-4680) on the driver's
// socket, as kubelet does, until the test ends.
func healthStream(t *testing.T, drv *dra.Driver, pluginDir string) drahealthv1.DRAResourceHealth_NodeWatchResourcesClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(pluginDir, "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	stream, err := drahealthv1.NewDRAResourceHealthClient(conn).NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// healthOf is each device's health and message in a report, by name.
func healthOf(t *testing.T, stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient) map[string]string {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range resp.Devices {
		if d.Device.PoolName != nodeName {
			t.Errorf("device %s in pool %q, want the slices' pool %q", d.Device.DeviceName, d.Device.PoolName, nodeName)
		}
		out[d.Device.DeviceName] = d.Health.String() + ":" + d.Message
	}
	return out
}

// TestHealthStream (KEP-4680): kubelet's health stream starts with every
// published device, then carries each change of a device's verdict, the
// reason an unhealthy device's taint has as its message, and a device no
// longer published as Unknown.
func TestHealthStream(t *testing.T) {
	dir := ""
	_, n, drv := startDriver(t, func(_ *kubeapi.Server, o *dra.Options) { o.HealthResend = time.Hour; dir = o.PluginDir })
	ctx := context.Background()
	node := dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}
	if err := drv.Publish(ctx, node, n.pools); err != nil {
		t.Fatal(err)
	}
	stream := healthStream(t, drv, dir)
	const vf, addr = "pci-0000-3b-01-6", "0000:3b:01.6"
	initial := healthOf(t, stream)
	if len(initial) != 14 || initial[vf] != "HEALTHY:" {
		t.Fatalf("initial report %v, want the 14 published devices healthy", initial)
	}
	const reason = "link enp59s0f0v6 is up but has no carrier"
	dropped := slices.Clone(n.pools)
	for i := range dropped {
		dropped[i].Devices = slices.DeleteFunc(slices.Clone(dropped[i].Devices), func(d offer.State) bool { return d.ID == addr })
	}
	for _, tt := range []struct {
		name   string
		change func() []dra.Pool
		want   string
	}{
		{"unhealthy", func() []dra.Pool { return withHealth(n.pools, addr, false, reason) }, "UNHEALTHY:" + reason},
		{"healthy again", func() []dra.Pool { return withHealth(n.pools, addr, true, "") }, "HEALTHY:"},
		{"no longer published", func() []dra.Pool { return dropped }, "UNKNOWN:hwnet no longer publishes this device: it left the node's DRA pools"},
	} {
		if err := drv.Publish(ctx, node, tt.change()); err != nil {
			t.Fatal(err)
		}
		got := healthOf(t, stream)
		if got[vf] != tt.want || len(got) != 14 {
			t.Errorf("%s: %s is %q in a report of %d devices, want %q in one of 14", tt.name, vf, got[vf], len(got), tt.want)
		}
	}
}

// TestHealthStreamResends: with nothing changing the stream repeats its
// report, so kubelet's lease on the health does not run out.
func TestHealthStreamResends(t *testing.T) {
	dir := ""
	_, n, drv := startDriver(t, func(_ *kubeapi.Server, o *dra.Options) { o.HealthResend = 50 * time.Millisecond; dir = o.PluginDir })
	if err := drv.Publish(context.Background(), dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	stream := healthStream(t, drv, dir)
	for i := range 3 {
		if got := healthOf(t, stream); len(got) != 14 {
			t.Errorf("report %d has %d devices, want 14", i, len(got))
		}
	}
}

// TestHealthStreamContextEnd: WatchHealthStatus returns nil once its
// context ends, both while kubelet does not take its report and while it
// waits for a change.
func TestHealthStreamContextEnd(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	drv, err := dra.NewUnregistered(dra.Options{NodeName: nodeName, PluginDir: filepath.Join(dir, "plugin"),
		RegistrarDir: filepath.Join(dir, "registry"), CDIDir: filepath.Join(dir, "cdi"), HealthResend: time.Hour,
		Ledger: openLedger(t, ledger.Sources{}, n.node.SysRoot())})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	for _, read := range []int{0, 1} {
		ctx, cancel := context.WithCancel(context.Background())
		reports := make(chan kubeletplugin.DeviceHealthReport)
		done := make(chan error, 1)
		go func() { done <- drv.WatchHealthStatus(ctx, reports) }()
		for range read {
			if r := <-reports; len(r.Devices) != 14 {
				t.Errorf("report of %d devices, want 14", len(r.Devices))
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("after %d reports read: WatchHealthStatus returned %v, want nil", read, err)
		}
	}
}
