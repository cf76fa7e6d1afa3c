package dra_test

import (
	"context"
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// TestDriverPublishes: the driver publishes the DRA pools' devices with
// their attributes on a real API server, taints a device that becomes
// unhealthy and removes the taint once it is healthy, each within 1 s;
// it tells Options.Published once, after the first slices are written.
func TestDriverPublishes(t *testing.T) {
	var published atomic.Int32
	api, n, drv := startDriver(t, func(_ *kubeapi.Server, o *dra.Options) { o.Published = func() { published.Add(1) } })
	ctx := context.Background()
	onNode := nodeSlices()
	node := dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}

	start := time.Now()
	if err := drv.Publish(ctx, node, n.pools); err != nil {
		t.Fatal(err)
	}
	devs := kubeapi.WaitSliceDevices(t, api.Client(), onNode, 30*time.Second, "slices published", func(d kubeapi.SliceDevices) bool { return len(d) == 14 })
	t.Logf("14 devices published in %v", time.Since(start))
	kubeapi.WaitFor(t, "Options.Published called", func() bool { return published.Load() > 0 })
	want := n.devices(t)
	for name, d := range devs {
		if !reflect.DeepEqual(d.Attributes, want[name].Attributes) {
			t.Errorf("%s: attributes on the API server differ from the published ones", name)
		}
	}

	const vf = "pci-0000-3b-01-6"
	for _, tt := range []struct {
		name    string
		healthy bool
		reason  string
		want    int
	}{
		{"taint", false, "PF 0000:3b:00.0 link enp59s0f0 is down", 1},
		{"untaint", true, "", 0},
	} {
		// A new list each time, as the agent judges one: the driver
		// keeps the list it was given.
		n.pools = withHealth(n.pools, "0000:3b:01.6", tt.healthy, tt.reason)
		start := time.Now()
		if err := drv.Publish(ctx, node, n.pools); err != nil {
			t.Fatal(err)
		}
		d := kubeapi.WaitSliceDevices(t, api.Client(), onNode, 30*time.Second, tt.name, func(d kubeapi.SliceDevices) bool { return len(d[vf].Taints) == tt.want })
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s took %v, want within 1s", tt.name, took)
		}
		if tt.want == 1 && (d[vf].Taints[0].Effect != resourceapi.DeviceTaintEffectNoSchedule || d[vf].Taints[0].Value != "PF-0000-3b-00.0-link-enp59s0f0-is-down") {
			t.Errorf("taint %+v", d[vf].Taints[0])
		}
	}
	if n := published.Load(); n != 1 {
		t.Errorf("Options.Published called %d times, want once", n)
	}
}

// TestDriverRestoresDeletedSlices: kubelet deletes every slice of its
// node when it starts; the driver publishes them again within 2 s, not at
// the library's sync 30 s later.
func TestDriverRestoresDeletedSlices(t *testing.T) {
	api, n, drv := startDriver(t)
	ctx := context.Background()
	if err := drv.Publish(ctx, dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	onNode := nodeSlices()
	all := func(d kubeapi.SliceDevices) bool { return len(d) == 14 }
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, 30*time.Second, "slices published", all)
	if err := api.Client().ResourceV1().ResourceSlices().DeleteCollection(ctx, metav1.DeleteOptions{}, onNode); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, 2*time.Second, "slices restored", all)
	t.Logf("slices restored %v after their deletion", time.Since(start).Round(time.Millisecond))
}

// TestDriverRepublishRacesNoPublish: a republish (kubelet registered the
// driver, someone deleted a slice) that runs while Publish does must not
// write an older device list after Publish gave a newer one: the slices
// end as the last Publish left them.
func TestDriverRepublishRacesNoPublish(t *testing.T) {
	api, n, drv := startDriver(t)
	ctx := context.Background()
	node := dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}
	const vf = "pci-0000-3b-01-6"
	tainted := withHealth(n.pools, "0000:3b:01.6", false, "link down")
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
				drv.Republish(ctx)
			}
		}
	})
	for i := range 400 {
		ps := tainted
		if i%2 == 1 {
			ps = n.pools
		}
		if err := drv.Publish(ctx, node, ps); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	onNode := nodeSlices()
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, 10*time.Second, "the last Publish's untainted device", func(d kubeapi.SliceDevices) bool {
		return len(d) == 14 && len(d[vf].Taints) == 0
	})
}

// TestDriverPublishesWithoutWaitingForSlices: the driver's first sync
// lists the slices an earlier agent left (the library's first
// PublishResources waited for its informer); Publish returns before that,
// so that an agent starting
// (or restarting under running pods) serves its device plugins and the
// CNI side without waiting for the API server, and prepare already knows
// the devices. The slices follow once the API server answers.
func TestDriverPublishesWithoutWaitingForSlices(t *testing.T) {
	var gate *kubeapi.RequestGate
	api, n, drv := startDriver(t, func(api *kubeapi.Server, o *dra.Options) {
		var cfg *rest.Config
		cfg, gate = kubeapi.GateRequests(api.Config(), sliceReads)
		o.KubeClient = kubernetes.NewForConfigOrDie(cfg)
	})
	gate.Close()
	published := make(chan error, 1)
	go func() {
		published <- drv.Publish(context.Background(), dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools)
	}()
	select {
	case err := <-published:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Publish did not return while the API server held the ResourceSlice reads")
	}
	kubeapi.WaitFor(t, "the driver's first read of ResourceSlices, held", func() bool { return gate.Held() > 0 })
	gate.Open()
	onNode := nodeSlices()
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, 30*time.Second, "slices published", func(d kubeapi.SliceDevices) bool { return len(d) == 14 })
}

// sliceReads matches the reads of ResourceSlices (lists and watches,
// which list first).
func sliceReads(key string) bool {
	return key == "LIST resourceslices" || key == "WATCH resourceslices"
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// startDriver runs the driver, until the test ends, for a virtual node's
// pools against a real API server that knows the node.
func startDriver(t *testing.T, with ...func(*kubeapi.Server, *dra.Options)) (*kubeapi.Server, *testNode, *dra.Driver) {
	t.Helper()
	api, n := startAPI(t, newTestNode(t))
	drv, _ := runDriver(t, api, n, with...)
	return api, n, drv
}

// startAPI starts a real API server that knows the node.
func startAPI(t *testing.T, n *testNode) (*kubeapi.Server, *testNode) {
	t.Helper()
	api := kubeapi.Start(t)
	if _, err := api.Client().CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return api, n
}

// runDriver runs a driver for n's pools against api until the test ends
// or the returned function stops it, as an agent's restart does.
func runDriver(t *testing.T, api *kubeapi.Server, n *testNode, with ...func(*kubeapi.Server, *dra.Options)) (*dra.Driver, func()) {
	t.Helper()
	dir := t.TempDir()
	opts := dra.Options{NodeName: nodeName, KubeClient: api.Client(), Metadata: metadata.NewForConfigOrDie(api.Config()),
		PluginDir: filepath.Join(dir, "plugin"), RegistrarDir: filepath.Join(dir, "registry"), CDIDir: filepath.Join(dir, "cdi"),
		DevinfoDir: filepath.Join(dir, "devinfo"), DevRoot: n.node.DevRoot(), SysfsRoot: n.node.SysRoot()}
	opts.Ledger = openLedger(t, ledger.Sources{Checkpoint: dra.CheckpointPath("", opts.PluginDir)}, n.node.SysRoot())
	for _, f := range with {
		f(api, &opts)
	}
	drv, err := dra.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(drv.Stop)
	t.Cleanup(stop)
	return drv, stop
}

// withHealth is ps with device id's health set, ps unchanged, as the
// agent judges a new list each time: the driver keeps the list it was
// given.
func withHealth(ps []dra.Pool, id string, healthy bool, reason string) []dra.Pool {
	out := slices.Clone(ps)
	for i := range out {
		out[i].Devices = slices.Clone(out[i].Devices)
		for j := range out[i].Devices {
			if out[i].Devices[j].ID == id {
				out[i].Devices[j].Healthy, out[i].Devices[j].Reason = healthy, reason
			}
		}
	}
	return out
}
