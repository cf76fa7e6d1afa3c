package deviceplugin

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// allocateFunc is Allocate called directly or through gRPC.
type allocateFunc func(context.Context, *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)

// BenchmarkAllocate allocates 1 and 4 VFs of the default virtual node (the
// 4 with two on vfio-pci), directly and through gRPC, with the device
// information files on a tmpfs as in production. In "again" the files are
// there from an earlier allocation of the same devices; in "new" they are
// not and must be created. It reports the 99th percentile too.
func BenchmarkAllocate(b *testing.B) {
	n := newTestNode(b)
	requests := map[int][]string{
		1: {netVF},
		4: {netVF, "0000:3b:01.1", vfioVF, vfioVF1},
	}
	h := startHarness(b, sriovNet, Options{DevRoot: n.node.DevRoot()}, n.devices(b, pf0))
	h.plugin.opts.DevinfoDir = tmpfsDir(b)
	client := h.client(b)
	for _, via := range []struct {
		name     string
		allocate allocateFunc
	}{
		{"direct", h.plugin.Allocate},
		{"grpc", func(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return client.Allocate(ctx, req)
		}},
	} {
		for _, size := range []int{1, 4} {
			for _, files := range []string{"again", "new"} {
				req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: requests[size]}}}
				b.Run(fmt.Sprintf("%s/%d/%s", via.name, size, files), func(b *testing.B) {
					var before func()
					if files == "new" {
						before = func() { removeDeviceInfo(b, h.plugin, requests[size]) }
					}
					benchmarkAllocate(b, via.allocate, req, before)
				})
			}
		}
	}
}

func removeDeviceInfo(b *testing.B, p *Plugin, ids []string) {
	for _, id := range ids {
		if err := devinfo.Remove(p.opts.DevinfoDir, p.ResourceName(), id); err != nil {
			b.Fatal(err)
		}
	}
}

// benchmarkAllocate times allocate; before, if not nil, runs untimed
// before each call.
func benchmarkAllocate(b *testing.B, allocate allocateFunc, req *pluginapi.AllocateRequest, before func()) {
	ctx := context.Background()
	if _, err := allocate(ctx, req); err != nil { // connects the gRPC client
		b.Fatal(err)
	}
	took := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if before != nil {
			b.StopTimer()
			before()
			b.StartTimer()
		}
		start := time.Now()
		if _, err := allocate(ctx, req); err != nil {
			b.Fatal(err)
		}
		took = append(took, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
}

// syntheticPool is 2048 VFs: 2 NUMA nodes with 8 PFs of 128 VFs each.
func syntheticPool() []offer.State {
	var out []offer.State
	for pf := range 16 {
		pfAddr := fmt.Sprintf("0000:%02x:00.0", 0x10+pf)
		for vf := range 128 {
			d := pools.Device{
				ID:       fmt.Sprintf("0000:%02x:%02x.%d", 0x10+pf, 1+vf/8, vf%8),
				Function: &discovery.Function{NUMANode: pf / 8, Driver: "iavf"},
				PF:       pfAddr,
				VFIndex:  vf,
			}
			out = append(out, offer.State{Device: d, Healthy: true})
		}
	}
	return out
}

func BenchmarkPrefer(b *testing.B) {
	devices := syntheticPool()
	p := New(sriovNet, Options{})
	p.SetDevices(devices)
	layout := p.current.Load().layout
	available := make([]string, len(devices))
	for i, d := range devices {
		available[len(devices)-1-i] = d.ID // kubelet's order is a set's
	}
	for _, bc := range []struct {
		name   string
		size   int
		must   []string
		policy pools.Policy
	}{
		{"pack/1", 1, nil, pools.Pack},
		{"pack/8", 8, nil, pools.Pack},
		{"pack/8-with-must", 8, []string{devices[1500].ID}, pools.Pack},
		{"spread/8", 8, nil, pools.Spread},
		{"pack/1500", 1500, nil, pools.Pack},
	} {
		req := PreferenceRequest{Available: available, MustInclude: bc.must, Size: bc.size, Policy: bc.policy}
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := layout.Prefer(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGetPreferredAllocationGRPC is kubelet's call for 8 of 2048
// devices, all of them offered.
func BenchmarkGetPreferredAllocationGRPC(b *testing.B) {
	devices := syntheticPool()
	h := startHarness(b, sriovNet, Options{}, devices)
	c := h.client(b)
	var available []string
	for _, d := range devices {
		available = append(available, d.ID)
	}
	req := &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: available, AllocationSize: 8},
	}}
	b.ReportAllocs()
	for range b.N {
		if _, err := c.GetPreferredAllocation(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSetDevicesToListAndWatch is the time from SetDevices changing a
// device's health to a ListAndWatch client (kubelet) receiving the list.
func BenchmarkSetDevicesToListAndWatch(b *testing.B) {
	n := newTestNode(b)
	for _, size := range []int{16, 2048} {
		devices := append(n.devices(b, pf0), n.devices(b, pf1)...)
		if size == 2048 {
			devices = syntheticPool()
		}
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			h := startHarness(b, sriovNet, Options{}, devices)
			stream, err := h.client(b).ListAndWatch(context.Background(), &pluginapi.Empty{})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			// The plugin keeps the list it is given: two lists that differ
			// in one device's health take turns.
			flipped := slices.Clone(devices)
			flipped[0].Healthy = !flipped[0].Healthy
			lists := [2][]offer.State{flipped, devices}
			for i := range b.N {
				h.plugin.SetDevices(lists[i%2])
				if _, err := stream.Recv(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGRPCRoundTrip is the cheapest call, GetDevicePluginOptions: the
// floor under the gRPC figures of the other benchmarks on this machine.
func BenchmarkGRPCRoundTrip(b *testing.B) {
	h := startHarness(b, sriovNet, Options{}, nil)
	c := h.client(b)
	b.ReportAllocs()
	for range b.N {
		if _, err := c.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{}); err != nil {
			b.Fatal(err)
		}
	}
}
