package dra_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// nodeSlices selects the node's slices.
func nodeSlices() metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: "spec.nodeName=" + nodeName}
}

// newBigNode is a node of 140 iavf VFs in one pool: three slices, 64, 64
// and 12 devices.
func newBigNode(t *testing.T) *testNode {
	t.Helper()
	spec := &virtualnode.Spec{Name: "dra-slices", PFs: []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 70}}}
	return newTestNodeOf(t, spec, `resourceList: [{resourceName: vfs, mode: dra, selectors: {drivers: [iavf]}}]`)
}

func publish(t *testing.T, drv *dra.Driver, n *testNode, ps []dra.Pool) {
	t.Helper()
	if err := drv.Publish(context.Background(), dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, ps); err != nil {
		t.Fatal(err)
	}
}

// settled: the slices are one complete generation of the pool (every
// slice of the same generation, as many as each says the pool has) and
// hold the want devices.
func settled(want int) func([]resourceapi.ResourceSlice) bool {
	return func(ss []resourceapi.ResourceSlice) bool {
		devs := 0
		for _, s := range ss {
			if s.Spec.Pool.Generation != ss[0].Spec.Pool.Generation || s.Spec.Pool.ResourceSliceCount != int64(len(ss)) {
				return false
			}
			devs += len(s.Spec.Devices)
		}
		return len(ss) > 0 && devs == want
	}
}

func taintOf(d resourceapi.Device, key string) *resourceapi.DeviceTaint {
	for i := range d.Taints {
		if d.Taints[i].Key == key {
			return &d.Taints[i]
		}
	}
	return nil
}

// TestDriverRestartWritesNothing: an agent restarted with its devices
// unchanged takes the slices over as they are, server-set taint times
// and all (an upgrade under running pods writes nothing), and a change
// then writes only the slice it is in, keeping the generation.
func TestDriverRestartWritesNothing(t *testing.T) {
	api, n := startAPI(t, newBigNode(t))
	tainted := withHealth(n.pools, n.pools[0].Devices[0].ID, false, "link down")
	drv, stop := runDriver(t, api, n)
	publish(t, drv, n, tainted)
	before := kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "140 devices published", settled(140))
	stop()

	// A device of the last slice.
	lastSlice := before[len(before)-1].Spec.Devices
	var last string
	for _, d := range n.pools[0].Devices {
		if dra.DeviceName(d.ID) == lastSlice[len(lastSlice)-1].Name {
			last = d.ID
		}
	}
	drv, _ = runDriver(t, api, n)
	publish(t, drv, n, tainted)
	publish(t, drv, n, withHealth(tainted, last, false, "link down"))
	after := kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "the last slice's device tainted", func(ss []resourceapi.ResourceSlice) bool {
		return settled(140)(ss) && taintOf(deviceIn(ss, last), dra.TaintKey) != nil
	})
	if len(after) != len(before) {
		t.Fatalf("%d slices after the restart, %d before", len(after), len(before))
	}
	for i := range before {
		b, a := before[i], after[i]
		rewritten := b.ResourceVersion != a.ResourceVersion
		switch {
		case b.Name != a.Name || b.Spec.Pool.Generation != a.Spec.Pool.Generation:
			t.Errorf("slice %s (generation %d) became %s (generation %d)", b.Name, b.Spec.Pool.Generation, a.Name, a.Spec.Pool.Generation)
		case i < len(before)-1 && rewritten:
			t.Errorf("slice %s rewritten after the restart, its devices unchanged", b.Name)
		case i == len(before)-1 && !rewritten:
			t.Errorf("slice %s not rewritten for its tainted device", b.Name)
		}
	}
}

// TestDriverRevertsForeignWrites: a slice someone else changes is written
// back, keeping the labels they added (as the library keeps them), and
// a slice someone else creates for the node and driver is deleted, each
// within 5 s, not at the library's sync 30 s later.
func TestDriverRevertsForeignWrites(t *testing.T) {
	for _, tt := range []struct {
		name     string
		write    func(context.Context, kubernetes.Interface, resourceapi.ResourceSlice) error
		reverted func([]resourceapi.ResourceSlice) bool
	}{
		{"update", func(ctx context.Context, c kubernetes.Interface, s resourceapi.ResourceSlice) error {
			s.Labels = map[string]string{"someone": "else"}
			s.Spec.Devices[0].Attributes = nil
			_, err := c.ResourceV1().ResourceSlices().Update(ctx, &s, metav1.UpdateOptions{})
			return err
		}, func(ss []resourceapi.ResourceSlice) bool {
			return len(ss) == 1 && len(ss[0].Spec.Devices[0].Attributes) > 0 && ss[0].Labels["someone"] == "else"
		}},
		{"create", func(ctx context.Context, c kubernetes.Interface, s resourceapi.ResourceSlice) error {
			s.ObjectMeta = metav1.ObjectMeta{Name: "00000-someone-else"}
			_, err := c.ResourceV1().ResourceSlices().Create(ctx, &s, metav1.CreateOptions{})
			return err
		}, func(ss []resourceapi.ResourceSlice) bool { return len(ss) == 1 }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api, n, drv := startDriver(t)
			publish(t, drv, n, n.pools)
			ss := kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "slices published", settled(14))
			if err := tt.write(context.Background(), api.Client(), ss[0]); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 5*time.Second, "the foreign write reverted", func(ss []resourceapi.ResourceSlice) bool {
				return settled(14)(ss) && tt.reverted(ss)
			})
			t.Logf("reverted %v after the write", time.Since(start).Round(time.Millisecond))
		})
	}
}

// TestDriverSlicesOneGeneration: shrinking, growing and shifting the
// pool across the slices' size limit leaves, once settled, one complete
// generation: every slice of it, and only those, as many as each says.
// Meanwhile, the pool the scheduler gathers (the slices of the highest
// generation, complete when as many as they say) is, whenever complete,
// one the driver published, never a mix of two.
func TestDriverSlicesOneGeneration(t *testing.T) {
	api, n := startAPI(t, newBigNode(t))
	drv, _ := runDriver(t, api, n)
	pools := watchPools(t, api.Client())
	published := map[string]bool{}
	for _, r := range []struct{ from, to int }{{0, 140}, {0, 60}, {0, 129}, {10, 140}, {0, 64}, {0, 0}, {0, 65}, {5, 140}} {
		ps := []dra.Pool{{Resource: n.pools[0].Resource, Devices: slices.Clone(n.pools[0].Devices[r.from:r.to])}}
		published[deviceSet(ps)] = true
		publish(t, drv, n, ps)
		k := r.to - r.from
		ss := kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "settled", settled(k))
		if want := max(1, (k+dra.MaxSliceDevices-1)/dra.MaxSliceDevices); len(ss) != want {
			t.Errorf("%d devices in %d slices, want %d", k, len(ss), want)
		}
	}
	for _, p := range pools() {
		if !published[p] {
			t.Errorf("the scheduler could see a complete pool never published: %.200s", p)
		}
	}
}

// deviceSet is ps's devices' names, sorted and joined.
func deviceSet(ps []dra.Pool) string {
	var names []string
	for _, p := range ps {
		for _, d := range p.Devices {
			names = append(names, dra.DeviceName(d.ID))
		}
	}
	slices.Sort(names)
	return strings.Join(names, ",")
}

// watchPools watches the node's slices from now and returns a function
// that stops and returns the device set of every complete pool seen, as
// the scheduler gathers a pool (k8s.io/dynamic-resource-allocation/
// structured): the slices of its highest generation, complete when as
// many as they say.
func watchPools(t *testing.T, client kubernetes.Interface) func() []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := client.ResourceV1().ResourceSlices().Watch(ctx, nodeSlices())
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	done := make(chan struct{})
	go func() {
		defer close(done)
		state := map[string]*resourceapi.ResourceSlice{}
		for ev := range w.ResultChan() {
			s, ok := ev.Object.(*resourceapi.ResourceSlice)
			if !ok {
				continue
			}
			state[s.Name] = s
			if ev.Type == watch.Deleted {
				delete(state, s.Name)
			}
			if p, ok := completePool(state); ok {
				seen = append(seen, p)
			}
		}
	}()
	return func() []string {
		cancel()
		w.Stop()
		<-done
		return seen
	}
}

// completePool is the device set of the slices of the highest
// generation, if they are complete.
func completePool(state map[string]*resourceapi.ResourceSlice) (string, bool) {
	var top int64
	for _, s := range state {
		top = max(top, s.Spec.Pool.Generation)
	}
	var names []string
	count, want := 0, int64(-1)
	for _, s := range state {
		if s.Spec.Pool.Generation != top {
			continue
		}
		count++
		want = s.Spec.Pool.ResourceSliceCount
		for _, d := range s.Spec.Devices {
			names = append(names, d.Name)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ","), int64(count) == want
}

// TestDriverKeepsTaintTimes: an update of a slice keeps the time of a
// taint that stayed (the API server sets it when a write has none), here
// one an earlier agent published long ago, and a new taint gets a new
// time.
func TestDriverKeepsTaintTimes(t *testing.T) {
	api, n, drv := startDriver(t)
	ctx := context.Background()
	a, b, c := n.pools[0].Devices[0].ID, n.pools[0].Devices[1].ID, n.pools[0].Devices[2].ID
	old := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	tainted := withHealth(n.pools, a, false, "link down")
	earlier := earlierSlice(t, n, tainted, old)
	if _, err := api.Client().ResourceV1().ResourceSlices().Create(ctx, earlier, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		ps   []dra.Pool
		also string
	}{
		{"b tainted", withHealth(tainted, b, false, "link down"), b},
		{"b healthy, c tainted", withHealth(tainted, c, false, "link down"), c},
	} {
		publish(t, drv, n, step.ps)
		ss := kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, step.name, func(ss []resourceapi.ResourceSlice) bool {
			return settled(14)(ss) && taintOf(deviceIn(ss, step.also), dra.TaintKey) != nil
		})
		if got := taintOf(deviceIn(ss, a), dra.TaintKey).TimeAdded; got == nil || !got.Equal(&old) {
			t.Errorf("%s: the taint that stayed was added %v, want %v", step.name, got, old)
		}
		if got := taintOf(deviceIn(ss, step.also), dra.TaintKey).TimeAdded; got == nil || got.Equal(&old) {
			t.Errorf("%s: the new taint was added %v, want now", step.name, got)
		}
	}
}

// earlierSlice is the slice an earlier agent would have published for
// ps, the taints added at added.
func earlierSlice(t *testing.T, n *testNode, ps []dra.Pool, added metav1.Time) *resourceapi.ResourceSlice {
	t.Helper()
	devs, err := dra.Devices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i := range devs {
		for j := range devs[i].Taints {
			devs[i].Taints[j].TimeAdded = &added
		}
	}
	node := nodeName
	return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{GenerateName: "00000-" + dra.DefaultDriverName + "-" + nodeName + "-"},
		Spec: resourceapi.ResourceSliceSpec{Driver: dra.DefaultDriverName, NodeName: &node, Devices: devs,
			Pool: resourceapi.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1}}}
}

func deviceIn(ss []resourceapi.ResourceSlice, id string) resourceapi.Device {
	for _, s := range ss {
		for _, d := range s.Spec.Devices {
			if d.Name == dra.DeviceName(id) {
				return d
			}
		}
	}
	return resourceapi.Device{}
}

// TestDriverUpdateConflict: a slice someone else changed while the
// driver's watch did not see it (held here) is written at a stale
// resourceVersion; the API server's 409 makes the driver read it again
// and write it, with the change it wanted and the foreign one reverted.
func TestDriverUpdateConflict(t *testing.T) {
	var conflicts atomic.Int32
	api, n, drv := startDriver(t, func(api *kubeapi.Server, o *dra.Options) {
		mcfg, watchGate := kubeapi.GateRequests(api.Config(), sliceReads)
		watchGate.Close()
		o.Metadata = metadata.NewForConfigOrDie(mcfg)
		kcfg := api.Config()
		kcfg.Wrap(countConflicts(&conflicts))
		o.KubeClient = kubernetes.NewForConfigOrDie(kcfg)
	})
	ctx := context.Background()
	publish(t, drv, n, n.pools)
	ss := kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "slices published", settled(14))
	foreign := ss[0]
	foreign.Spec.Devices[0].Attributes = nil
	if _, err := api.Client().ResourceV1().ResourceSlices().Update(ctx, &foreign, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	vf := n.pools[0].Devices[3].ID
	publish(t, drv, n, withHealth(n.pools, vf, false, "link down"))
	kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "the change written over the foreign one", func(ss []resourceapi.ResourceSlice) bool {
		return settled(14)(ss) && len(ss[0].Spec.Devices[0].Attributes) > 0 && taintOf(deviceIn(ss, vf), dra.TaintKey) != nil
	})
	if conflicts.Load() == 0 {
		t.Error("no conflict: the driver wrote at the foreign resourceVersion it could not have seen")
	}
}

// countConflicts counts the API server's 409 answers to the driver.
func countConflicts(n *atomic.Int32) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && resp.StatusCode == http.StatusConflict {
				n.Add(1)
			}
			return resp, err
		})
	}
}

// TestDriverRetriesFailedWrites: writes the API server refuses for a
// while (here its first three creates, 503) are retried with a backoff
// until the slices are published.
func TestDriverRetriesFailedWrites(t *testing.T) {
	var refused atomic.Int32
	api, n, drv := startDriver(t, func(api *kubeapi.Server, o *dra.Options) {
		cfg := api.Config()
		cfg.Wrap(refuseCreates(&refused, 3))
		o.KubeClient = kubernetes.NewForConfigOrDie(cfg)
	})
	publish(t, drv, n, n.pools)
	kubeapi.WaitSlices(t, api.Client(), nodeSlices(), 30*time.Second, "slices published after refused creates", settled(14))
	if got := refused.Load(); got != 3 {
		t.Errorf("%d creates refused, want 3", got)
	}
}

// refuseCreates answers the first n creates of ResourceSlices with 503
// Service Unavailable, counting them.
func refuseCreates(refused *atomic.Int32, n int32) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			create := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/resourceslices")
			if create && refused.Add(1) <= n {
				return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
					Header: http.Header{"Content-Type": {"text/plain"}}, Body: http.NoBody, Request: req}, nil
			}
			if create {
				refused.Add(-1)
			}
			return rt.RoundTrip(req)
		})
	}
}
