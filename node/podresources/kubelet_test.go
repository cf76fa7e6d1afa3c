package podresources_test

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// getMode is how the test kubelet answers Get.
type getMode int

const (
	getServed getMode = iota
	// getUnimplemented is a kubelet before 1.27, whose API has no Get.
	getUnimplemented
	// getDisabled is a kubelet with feature gate KubeletPodResourcesGet
	// off.
	getDisabled
)

// kubelet is the kubelet side of the PodResources API, served over a real
// unix socket, answering as kubelet's server does.
type kubelet struct {
	v1.UnimplementedPodResourcesListerServer
	pods []*v1.PodResources
	get  getMode

	mu sync.Mutex
	// reject is how many more calls the rate limit turns away; each
	// refusal is sent to rejected when set.
	reject   int
	rejected chan struct{}
	// calls counts the calls that got through, by method name.
	calls map[string]int
}

// serve serves k on a unix socket in a temporary directory until the test
// ends and returns the socket's path.
func (k *kubelet) serve(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubelet.sock")
	k.serveAt(t, path)
	return path
}

func (k *kubelet) serveAt(t *testing.T, path string) *grpc.Server {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	k.mu.Lock()
	if k.calls == nil {
		k.calls = map[string]int{}
	}
	k.mu.Unlock()
	s := grpc.NewServer(grpc.UnaryInterceptor(k.rateLimit))
	v1.RegisterPodResourcesListerServer(s, k)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return s
}

// rateLimit turns calls away as kubelet's limiter does.
func (k *kubelet) rateLimit(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.reject > 0 {
		k.reject--
		if k.rejected != nil {
			k.rejected <- struct{}{}
		}
		return nil, status.Error(codes.ResourceExhausted, "rejected by rate limit")
	}
	k.calls[filepath.Base(info.FullMethod)]++
	return handler(ctx, req)
}

func (k *kubelet) count(method string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[method]
}

func (k *kubelet) List(context.Context, *v1.ListPodResourcesRequest) (*v1.ListPodResourcesResponse, error) {
	return &v1.ListPodResourcesResponse{PodResources: k.pods}, nil
}

func (k *kubelet) Get(ctx context.Context, req *v1.GetPodResourcesRequest) (*v1.GetPodResourcesResponse, error) {
	switch k.get {
	case getUnimplemented:
		return k.UnimplementedPodResourcesListerServer.Get(ctx, req)
	case getDisabled:
		return nil, fmt.Errorf("PodResources API Get method disabled")
	}
	for _, p := range k.pods {
		if p.Namespace == req.PodNamespace && p.Name == req.PodName {
			return &v1.GetPodResourcesResponse{PodResources: p}, nil
		}
	}
	return nil, fmt.Errorf("pod %s in namespace %s not found", req.PodName, req.PodNamespace)
}

// devices is one ContainerDevices entry of a resource.
func devices(resource string, numa int64, ids ...string) *v1.ContainerDevices {
	return &v1.ContainerDevices{ResourceName: resource, DeviceIds: ids, Topology: &v1.TopologyInfo{Nodes: []*v1.NUMANode{{ID: numa}}}}
}

// testPods are a node's pods: one with two E810 VFs in its first
// container, split over NUMA nodes as kubelet reports them, and a sidecar
// and a container without; one with a ConnectX VF and an E810 VF; one with
// none.
func testPods() []*v1.PodResources {
	return []*v1.PodResources{{
		Namespace: "ran", Name: "du-0",
		Containers: []*v1.ContainerResources{
			{Name: "proxy", Devices: []*v1.ContainerDevices{devices("hwnet.io/e810", 0, "0000:3b:01.3")}},
			{Name: "du", Devices: []*v1.ContainerDevices{
				devices("hwnet.io/e810", 1, "0000:3e:01.1"),
				devices("hwnet.io/e810", 0, "0000:3b:01.0"),
				devices("nvidia.com/gpu", 0, "GPU-1"),
			}},
			{Name: "logger"},
		},
	}, {
		Namespace: "hpc", Name: "mpi-0",
		Containers: []*v1.ContainerResources{{Name: "rank", Devices: []*v1.ContainerDevices{
			devices("hwnet.io/cx6", 0, "0000:41:01.0"),
			devices("hwnet.io/e810", 0, "0000:3b:01.2"),
		}}},
	}, {
		Namespace: "default", Name: "web",
		Containers: []*v1.ContainerResources{{Name: "nginx"}},
	}}
}
