package dra_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/dra"
)

func withConfig(c *resourceapi.ResourceClaim, source resourceapi.AllocationConfigSource, requests []string, params string) *resourceapi.ResourceClaim {
	c.Status.Allocation.Devices.Config = append(c.Status.Allocation.Devices.Config, resourceapi.DeviceAllocationConfiguration{
		Source: source, Requests: requests,
		DeviceConfiguration: resourceapi.DeviceConfiguration{Opaque: &resourceapi.OpaqueDeviceConfiguration{
			Driver: dra.DefaultDriverName, Parameters: runtime.RawExtension{Raw: []byte(params)}}},
	})
	return c
}

func forPod(c *resourceapi.ResourceClaim, uid string) *resourceapi.ResourceClaim {
	c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "p", UID: k8stypes.UID(uid)})
	return c
}

// TestKEP4817_PrepareNetworkConfig: hwnet's opaque configuration in a claim
// or its class names each device's network; the claim's overrides the
// class's; bad configuration fails the prepare naming the field.
func TestKEP4817_PrepareNetworkConfig(t *testing.T) {
	n := newTestNode(t)
	const two = `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"sriov-net","interface":"net1","ips":["10.56.0.10/24"]},{"name":"sriov-net","interface":"net2"}]}`
	const one = `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"other"}]}`
	tests := []struct {
		name    string
		claim   *resourceapi.ResourceClaim
		want    []string // each device's network element, "" for none
		wantErr string
	}{
		{"one element per device", withConfig(claim("u1", alloc("vfs", "pci-0000-3b-01-1"), alloc("vfs", "pci-0000-3b-01-2")), resourceapi.AllocationConfigSourceClaim, []string{"vfs"}, two),
			[]string{`{"name":"sriov-net","interface":"net1","ips":["10.56.0.10/24"]}`, `{"name":"sriov-net","interface":"net2"}`}, ""},
		{"one element for all devices", withConfig(claim("u2", alloc("vfs", "pci-0000-3b-01-1"), alloc("vfs", "pci-0000-3b-01-2")), resourceapi.AllocationConfigSourceClass, nil, one),
			[]string{`{"name":"other"}`, `{"name":"other"}`}, ""},
		{"claim overrides class", withConfig(withConfig(claim("u3", alloc("vfs", "pci-0000-3b-01-1"), alloc("vfs", "pci-0000-3b-01-2")),
			resourceapi.AllocationConfigSourceClass, nil, one), resourceapi.AllocationConfigSourceClaim, []string{"vfs"}, two),
			[]string{`{"name":"sriov-net","interface":"net1","ips":["10.56.0.10/24"]}`, `{"name":"sriov-net","interface":"net2"}`}, ""},
		{"other request unconfigured", withConfig(claim("u4", alloc("vfs", "pci-0000-3b-01-1"), alloc("dpdk", "pci-0000-3b-01-6")), resourceapi.AllocationConfigSourceClaim, []string{"vfs"}, one),
			[]string{`{"name":"other"}`, ""}, ""},
		{"bad mac names the field", withConfig(claim("u5", alloc("vfs", "pci-0000-3b-01-1")), resourceapi.AllocationConfigSourceClaim, nil,
			`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"sriov-net","mac":"zz:11"}]}`), nil,
			`ResourceClaim ns/claim-u5: status.allocation.devices.config[0] (from FromClaim, requests []) opaque.parameters "networks" element 0 ("sriov-net"): "mac" "zz:11"`},
		{"unknown field", withConfig(claim("u6", alloc("vfs", "pci-0000-3b-01-1")), resourceapi.AllocationConfigSourceClaim, nil,
			`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","network":[]}`), nil, `unknown field "network"`},
		{"wrong kind", withConfig(claim("u7", alloc("vfs", "pci-0000-3b-01-1")), resourceapi.AllocationConfigSourceClaim, nil,
			`{"apiVersion":"hwnet.io/v1","kind":"NetworkConfig","networks":[{"name":"a"}]}`), nil, `"apiVersion" "hwnet.io/v1"`},
		{"too few elements", withConfig(claim("u8", alloc("vfs", "pci-0000-3b-01-1"), alloc("vfs", "pci-0000-3b-01-2"), alloc("vfs", "pci-0000-3b-01-3")), resourceapi.AllocationConfigSourceClaim, nil, two),
			nil, `"networks": 2 elements for 3 devices`},
		{"one element with a per-device key", withConfig(claim("u9", alloc("vfs", "pci-0000-3b-01-1"), alloc("vfs", "pci-0000-3b-01-2")), resourceapi.AllocationConfigSourceClaim, nil,
			`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a","interface":"data"}]}`), nil, `"networks" element 0: "interface" cannot serve 2 devices`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPreparer(t, n, t.TempDir())
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			res := p.prepare(t, forPod(tt.claim, "pod-1"))
			if tt.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", res.Err, tt.wantErr)
				}
				return
			}
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			devs, err := p.drv.PodDevices(context.Background(), netclaim.Pod{UID: "pod-1"})
			if err != nil || len(devs) != len(tt.want) {
				t.Fatalf("devices %+v (%v), want %d", devs, err, len(tt.want))
			}
			for i, d := range devs {
				if got := compact(t, d.Network); got != tt.want[i] || d.Claim.UID != string(tt.claim.UID) || d.PCIAddress == "" {
					t.Errorf("device %d: %+v network %s, want %s", i, d, got, tt.want[i])
				}
			}
			if other, _ := p.drv.PodDevices(context.Background(), netclaim.Pod{UID: "pod-2", Namespace: "ns"}); len(other) != 0 {
				t.Errorf("pod-2 gets %+v", other)
			}
		})
	}
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPodDevices_SharedClaim: kubelet prepares a claim once, for its first
// pod; a second pod the claim is reserved for later is never prepared for,
// yet gets the claim's devices, as the pod names the claim. A pod of
// another namespace naming a claim of the same name gets nothing.
func TestPodDevices_SharedClaim(t *testing.T) {
	n := newTestNode(t)
	p := newPreparer(t, n, t.TempDir())
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	shared := claim("s", alloc("vfs", "pci-0000-3b-01-1"), alloc("vfs", "pci-0000-3b-01-2"))
	if res := p.prepare(t, forPod(shared, "pod-1")); res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, tt := range []struct {
		pod  netclaim.Pod
		want int
	}{
		{netclaim.Pod{UID: "pod-1", Namespace: "ns", Claims: []string{"claim-s"}}, 2},
		{netclaim.Pod{UID: "pod-2", Namespace: "ns", Claims: []string{"other", "claim-s"}}, 2},
		{netclaim.Pod{UID: "pod-3", Namespace: "ns2", Claims: []string{"claim-s"}}, 0},
		{netclaim.Pod{UID: "pod-4", Namespace: "ns"}, 0},
	} {
		devs, err := p.drv.PodDevices(context.Background(), tt.pod)
		if err != nil || len(devs) != tt.want {
			t.Errorf("pod %+v: devices %+v (%v), want %d", tt.pod, devs, err, tt.want)
		}
	}
}

// TestPodDevicesBesideCalls: the CNI side lists a pod's devices while
// kubelet prepares and unprepares its claim; each answer is the claim's
// device or none, never part of a call's change (run with -race: the
// checkpoint kept between calls is read while the next call changes it).
func TestPodDevicesBesideCalls(t *testing.T) {
	n := newTestNode(t)
	p := newPreparer(t, n, t.TempDir())
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	pod := netclaim.Pod{UID: "pod-1", Namespace: "ns", Claims: []string{"claim-a"}}
	beside(t, func(ctx context.Context) error {
		devs, err := p.drv.PodDevices(ctx, pod)
		if err == nil && len(devs) > 1 {
			err = fmt.Errorf("%d devices, want the claim's one or none", len(devs))
		}
		if _, rerr := p.drv.Rebound(); err == nil {
			err = rerr
		}
		return err
	})
	for range 50 {
		if res := p.prepare(t, claim("a", alloc("r", "pci-0000-3b-01-6"))); res.Err != nil {
			t.Fatal(res.Err)
		}
		if err := p.unprepare(t, "a"); err != nil {
			t.Fatal(err)
		}
	}
}

// beside runs view again and again beside the test's calls; at the
// test's cleanup, which comes before its driver's, it stops, waits for it
// and fails t with view's first error.
func beside(t *testing.T, view func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if err := view(ctx); err != nil {
				errs <- err
				return
			}
		}
	})
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Error(err)
		}
	})
}
