package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/node/podresources"
)

func TestInterfaceNames(t *testing.T) {
	tests := []struct {
		name    string
		ifaces  []string // requested names, "" for none
		want    []string
		wantErr string
	}{
		{"4.2.1 generated names net1 net2 by position", []string{"", ""}, []string{"net1", "net2"}, ""},
		{"4.1.2.1.5.1 requested name used as CNI_IFNAME", []string{"data0", ""}, []string{"data0", "net1"}, ""},
		{"4.2.1 generated name skips a requested one", []string{"", "net1"}, []string{"net2", "net1"}, ""},
		{"4.2.1 generated names skip several requested", []string{"net2", "", "net1", ""}, []string{"net2", "net3", "net1", "net4"}, ""},
		{"4.1.2.1.5 default network's interface refused", []string{"eth0"}, nil, `"interface" "eth0" is the cluster-wide default network's interface`},
		{"4.1.2.1.5 annotation and claim asking one name refused", []string{"data1", "", "data1"}, nil, `network 2 ("net-a"): "interface" "data1": another of the pod's networks`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sels := make([]selection.Selection, len(tt.ifaces))
			for i, n := range tt.ifaces {
				sels[i] = selection.Selection{Name: "net-a", Namespace: "ns", Interface: n}
			}
			got, err := interfaceNames(sels, "eth0")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("interfaceNames = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

// podDevices is a DeviceSource answering from a fixed allocation and
// counting its calls; an answer waits for release when it is set.
type podDevices struct {
	pod     podresources.Pod
	calls   atomic.Int32
	release chan struct{}
}

func (p *podDevices) Get(context.Context, string, string) (podresources.Pod, error) {
	p.calls.Add(1)
	if p.release != nil {
		<-p.release
	}
	return p.pod, nil
}

func TestAssignDevices(t *testing.T) {
	const sriov, ib = "intel.com/sriov_a", "nvidia.com/ib"
	twoContainers := podresources.Pod{Containers: []podresources.Container{
		{Name: "app", Devices: map[string][]string{sriov: {"0000:3b:02.1", "0000:3b:02.3"}}},
		{Name: "sidecar", Devices: map[string][]string{sriov: {"0000:3b:02.0"}, ib: {"0000:41:00.2"}}},
	}}
	tests := []struct {
		name      string
		resources []string // per attachment, "" for none
		want      []string
		wantErr   string
	}{
		{"container order then ID order, annotation order", []string{sriov, sriov, sriov},
			[]string{"0000:3b:02.1", "0000:3b:02.3", "0000:3b:02.0"}, ""},
		{"resources assigned independently", []string{ib, sriov, "", sriov},
			[]string{"0000:41:00.2", "0000:3b:02.1", "", "0000:3b:02.3"}, ""},
		{"fewer devices than networks", []string{ib, ib}, nil,
			"holds 1 device(s) of nvidia.com/ib but its networks need 2: ns/a (net1), ns/b (net2)"},
		{"resource the pod does not hold", []string{"example.com/none"}, nil, "holds 0 device(s) of example.com/none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &podDevices{pod: twoContainers}
			d := New(Options{Devices: src})
			atts := make([]attachment, len(tt.resources))
			for i, r := range tt.resources {
				atts[i] = attachment{network: "ns/" + string(rune('a'+i)), ifName: "net" + string(rune('1'+i)), resource: r}
			}
			err := d.assignDevices(context.Background(), cache.Pod{Namespace: "ns", Name: "p", UID: "u1"}, atts, nil)
			if tt.wantErr != "" {
				var pe *podError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &pe) {
					t.Fatalf("err = %v, want a pod error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := make([]string, len(atts))
			seen := map[string]bool{}
			for i, a := range atts {
				got[i] = a.deviceID
				if a.deviceID != "" && seen[a.deviceID] {
					t.Fatalf("device %s given to two attachments", a.deviceID)
				}
				seen[a.deviceID] = true
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("devices = %v, want %v", got, tt.want)
			}
		})
	}
}

// One PodResources call serves a pod however many attachments and sandbox
// re-creations it has; kubelet rate-limits the API.
func TestDeviceCacheOneGetPerPod(t *testing.T) {
	src := &podDevices{pod: podresources.Pod{Containers: []podresources.Container{
		{Name: "app", Devices: map[string][]string{"r": {"a", "b"}}}}}}
	c := newDeviceCache(src, 2)
	ctx := context.Background()
	for range 3 {
		if _, err := c.get(ctx, cache.Pod{UID: "u1"}); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("PodResources calls = %d, want 1", n)
	}
	for _, uid := range []string{"u2", "u3"} {
		c.get(ctx, cache.Pod{UID: uid})
	}
	if _, ok := c.lookup("u1"); ok {
		t.Fatal("cache holds more pods than its bound")
	}
	c.forget("u3")
	if _, ok := c.lookup("u3"); ok {
		t.Fatal("forgotten pod still cached")
	}
}

// A Get started early (prefetch) serves the ADD that then asks, and every
// other caller asking meanwhile; an answer without devices (kubelet has
// not recorded the allocation yet) is asked again.
func TestDeviceCachePrefetch(t *testing.T) {
	held := podresources.Pod{Containers: []podresources.Container{
		{Name: "app", Devices: map[string][]string{"r": {"a"}}}}}
	tests := []struct {
		name  string
		pod   podresources.Pod
		again bool // whether the last get must ask kubelet again
	}{
		{"devices: one Get for all", held, false},
		{"no devices yet: asked again", podresources.Pod{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &podDevices{pod: tt.pod, release: make(chan struct{})}
			c := newDeviceCache(src, 8)
			ctx := context.Background()
			pod := cache.Pod{Namespace: "ns", Name: "p", UID: "u1"}
			c.prefetch(ctx, pod)
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					if got, err := c.get(ctx, pod); err != nil || !reflect.DeepEqual(got, tt.pod) {
						t.Errorf("get = %v, %v; want %v", got, err, tt.pod)
					}
				})
			}
			close(src.release)
			wg.Wait()
			before := src.calls.Load()
			c.get(ctx, pod)
			after := src.calls.Load()
			if !tt.again && after != 1 {
				t.Fatalf("PodResources calls = %d, want 1", after)
			}
			if tt.again && after != before+1 {
				t.Fatalf("an answer without devices was cached: calls %d before the last get, %d after", before, after)
			}
		})
	}
}

// A pod event's Get can reach kubelet before it admitted the pod. An ADD
// that joins that Get must not take its "not found" (or its empty answer)
// for the pod's allocation: it asks kubelet again.
func TestDeviceCacheEarlyAnswerNotTrustedByAdd(t *testing.T) {
	held := podresources.Pod{Namespace: "ns", Name: "p", Containers: []podresources.Container{
		{Name: "app", Devices: map[string][]string{"r": {"a"}}}}}
	tests := []struct {
		name  string
		early podresources.Pod
		err   error
	}{
		{"not found yet", podresources.Pod{}, podresources.ErrPodNotFound},
		{"no devices yet", podresources.Pod{Namespace: "ns", Name: "p"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				src := &admittingKubelet{before: tt.early, beforeErr: tt.err, after: held, release: make(chan struct{})}
				c := newDeviceCache(src, 8)
				pod := cache.Pod{Namespace: "ns", Name: "p", UID: "u1"}
				c.prefetchEarly(pod)
				got := make(chan podresources.Pod, 1)
				go func() {
					p, err := c.get(context.Background(), pod)
					if err != nil {
						t.Errorf("get: %v", err)
					}
					got <- p
				}()
				synctest.Wait() // the ADD waits on the pod event's Get
				close(src.release)
				if p := <-got; !reflect.DeepEqual(p, held) {
					t.Fatalf("get = %+v, want kubelet's answer after admission %+v", p, held)
				}
			})
		})
	}
}

// admittingKubelet answers its first Get as before admitting the pod, once
// release closes, and every later one as after.
type admittingKubelet struct {
	before, after podresources.Pod
	beforeErr     error
	release       chan struct{}
	calls         atomic.Int32
}

func (k *admittingKubelet) Get(context.Context, string, string) (podresources.Pod, error) {
	if k.calls.Add(1) > 1 {
		return k.after, nil
	}
	<-k.release
	return k.before, k.beforeErr
}

// Pod events ask kubelet early, a bounded number of times for a pod that
// holds no devices (its answers are never cached), once for one that does.
func TestPodSeenPrefetchesBounded(t *testing.T) {
	held := podresources.Pod{Containers: []podresources.Container{
		{Name: "app", Devices: map[string][]string{"r": {"a"}}}}}
	networks := map[string]string{selection.Annotation: "net-a"}
	tests := []struct {
		name        string
		pod         podresources.Pod
		annotations map[string]string
		wantCalls   int32
	}{
		{"devices: asked once", held, networks, 1},
		{"no devices: asked at most earlyTries times", podresources.Pod{}, networks, earlyTries},
		{"no networks annotation: never asked", held, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &podDevices{pod: tt.pod}
			d := New(Options{Devices: src})
			pod := cache.Pod{Namespace: "ns", Name: "p", UID: "u1", Annotations: tt.annotations}
			for range 10 {
				d.PodSeen(pod)
				waitIdle(t, d.devices)
			}
			if n := src.calls.Load(); n != tt.wantCalls {
				t.Fatalf("PodResources calls after 10 pod events = %d, want %d", n, tt.wantCalls)
			}
		})
	}
}

// waitIdle waits until no Get is under way.
func waitIdle(t *testing.T, c *deviceCache) {
	t.Helper()
	for range 1000 {
		c.mu.Lock()
		n := len(c.inflight)
		c.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a PodResources Get never finished")
}

func TestParsePodArgs(t *testing.T) {
	p, err := parsePodArgs("IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_INFRA_CONTAINER_ID=abc;K8S_POD_UID=u")
	if err != nil {
		t.Fatal(err)
	}
	if p.ref != (cache.PodRef{Namespace: "ns", Name: "p", UID: "u"}) || len(p.pairs) != 5 || !p.isPod() {
		t.Fatalf("parsePodArgs = %+v", p)
	}
	if _, err := parsePodArgs("K8S_POD_NAME"); err == nil || !strings.Contains(err.Error(), `"K8S_POD_NAME" is not KEY=VALUE`) {
		t.Fatalf("err = %v", err)
	}
}

// TestKEP4817_ClaimRequestsOrder: the claim networks come in the devices'
// order, a device without a network gives none, and spare devices are
// kept by resource for NADs of DRA pools.
func TestKEP4817_ClaimRequestsOrder(t *testing.T) {
	devs := []netclaim.Device{
		{Claim: netclaim.ClaimRef{Name: "a"}, PCIAddress: "0000:3b:01.1", Resource: "r", Network: json.RawMessage(`{"name":"x","interface":"data1"}`)},
		{Claim: netclaim.ClaimRef{Name: "a"}, PCIAddress: "0000:3b:01.2", Resource: "r"},
		{Claim: netclaim.ClaimRef{Name: "b"}, PCIAddress: "0000:3b:01.3", Resource: "r", Network: json.RawMessage(`{"name":"y"}`)},
	}
	reqs, err := (&Delegator{}).claimRequests(context.Background(), cache.Pod{Namespace: "ns"}, devs)
	if err != nil || len(reqs) != 2 {
		t.Fatalf("%+v (%v), want 2 requests", reqs, err)
	}
	if reqs[0].sel.Ref() != "ns/x" || reqs[0].claimDevice.PCIAddress != "0000:3b:01.1" || reqs[1].sel.Ref() != "ns/y" || reqs[1].claimDevice.PCIAddress != "0000:3b:01.3" {
		t.Errorf("requests %+v %+v", reqs[0], reqs[1])
	}
	if spare := spareClaimDevices(devs); len(spare["r"]) != 1 || spare["r"][0].PCIAddress != "0000:3b:01.2" {
		t.Errorf("spare %+v, want the device without a network", spare)
	}
	devs[2].Network = json.RawMessage(`{"name":"y","interface":"data1"}`)
	if _, err := (&Delegator{}).claimRequests(context.Background(), cache.Pod{Namespace: "ns"}, devs); err == nil {
		t.Error("two claim networks asking data1 accepted")
	}
}
