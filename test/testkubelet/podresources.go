package testkubelet

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesapi "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// PodResources serves kubelet's PodResources API from a list of pods the
// test sets, as kubelet does from its device manager's checkpoint.
type PodResources struct {
	podresourcesapi.UnimplementedPodResourcesListerServer
	server *grpc.Server
	path   string

	mu    sync.Mutex
	pods  []*podresourcesapi.PodResources
	lists int
}

// ServePodResources listens on the unix socket path.
func ServePodResources(path string) (*PodResources, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("test kubelet pod resources: %w", err)
	}
	// Close removes the socket itself: a Serve that starts only after
	// Stop closes its listener then, which would unlink the socket a
	// kubelet restarted at the same path serves by then.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	pr := &PodResources{server: grpc.NewServer(), path: path}
	podresourcesapi.RegisterPodResourcesListerServer(pr.server, pr)
	go pr.server.Serve(l) //nolint:errcheck // ends with Close
	return pr, nil
}

// Close stops serving and removes the socket, as kubelet's goes when it
// stops.
func (pr *PodResources) Close() {
	pr.server.Stop()
	os.Remove(pr.path)
}

// SetPod records that kubelet allocated ids of resource to the pod's one
// container "main", replacing what it held; no ids forgets the pod.
func (pr *PodResources) SetPod(namespace, name, resource string, ids ...string) {
	if len(ids) == 0 {
		pr.SetContainers(namespace, name)
		return
	}
	pr.SetContainers(namespace, name, Container{Name: "main", Devices: map[string][]string{resource: ids}})
}

// Container is one container's allocation: device IDs by resource name.
type Container struct {
	Name    string
	Devices map[string][]string
}

// SetContainers records the pod's allocation, container by container in
// the order given, replacing what it held; no containers forgets the pod.
func (pr *PodResources) SetContainers(namespace, name string, containers ...Container) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	kept := pr.pods[:0]
	for _, p := range pr.pods {
		if p.Namespace != namespace || p.Name != name {
			kept = append(kept, p)
		}
	}
	pr.pods = kept
	if len(containers) == 0 {
		return
	}
	pod := &podresourcesapi.PodResources{Namespace: namespace, Name: name}
	for _, c := range containers {
		cr := &podresourcesapi.ContainerResources{Name: c.Name}
		for _, res := range slices.Sorted(maps.Keys(c.Devices)) {
			cr.Devices = append(cr.Devices, &podresourcesapi.ContainerDevices{ResourceName: res, DeviceIds: c.Devices[res]})
		}
		pod.Containers = append(pod.Containers, cr)
	}
	pr.pods = append(pr.pods, pod)
}

// Lists is how many List calls kubelet answered.
func (pr *PodResources) Lists() int {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.lists
}

func (pr *PodResources) List(context.Context, *podresourcesapi.ListPodResourcesRequest) (*podresourcesapi.ListPodResourcesResponse, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.lists++
	return &podresourcesapi.ListPodResourcesResponse{PodResources: append([]*podresourcesapi.PodResources(nil), pr.pods...)}, nil
}

func (pr *PodResources) Get(_ context.Context, req *podresourcesapi.GetPodResourcesRequest) (*podresourcesapi.GetPodResourcesResponse, error) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, p := range pr.pods {
		if p.Namespace == req.PodNamespace && p.Name == req.PodName {
			return &podresourcesapi.GetPodResourcesResponse{PodResources: p}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s/%s not found", req.PodNamespace, req.PodName)
}
