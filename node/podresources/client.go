// Package podresources is a client of kubelet's PodResources API v1: which
// devices kubelet allocated to which pod. The agent uses it to forget the
// device-info files of devices no pod holds any more, and the CNI side to
// find the devices of the pod it wires.
package podresources

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultSocket is where kubelet serves the PodResources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessageSize is what kubelet's own client accepts: a List of a full
// node outgrows gRPC's default of 4 MiB.
const maxMessageSize = 16 << 20

// Retries start at one token's worth of kubelet's rate limit (100 calls
// per second, bursts of 10, by default) and double.
const (
	firstRetryDelay = 10 * time.Millisecond
	maxRetryDelay   = time.Second
)

// ErrPodNotFound says kubelet knows no pod of that namespace and name.
var ErrPodNotFound = errors.New("pod not found")

// Client talks to kubelet's PodResources API. It is safe for concurrent
// use. Its calls wait for kubelet, e.g. while it restarts, and retry when
// kubelet's rate limit turns them away, as long as their context lets
// them.
type Client struct {
	socket string
	conn   *grpc.ClientConn
	api    v1.PodResourcesListerClient
	// listOnly says kubelet answered Get as unimplemented (before 1.27) or
	// disabled (feature gate KubeletPodResourcesGet off); List serves Get.
	listOnly atomic.Bool
}

// Pod is a pod's resources as kubelet reports them.
type Pod struct {
	Namespace string
	Name      string
	// Containers are in kubelet's order: restartable init containers,
	// then the containers, each as the pod's spec lists them.
	Containers []Container
}

// Container is one container's devices.
type Container struct {
	Name string
	// Devices maps a resource name to the IDs of the devices of that
	// resource allocated to the container, sorted: kubelet reports them in
	// no stable order, and callers that pick one device per network must
	// agree from call to call.
	Devices map[string][]string
}

// PodRef names the container a device is allocated to.
type PodRef struct {
	Namespace string
	Name      string
	Container string
}

// ContainerDevices are the devices of one resource allocated to one
// container.
type ContainerDevices struct {
	Container string
	IDs       []string
}

// Dial connects to kubelet's PodResources API at socketPath and returns
// once kubelet answers, or with an error once ctx is done.
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	if socketPath == "" {
		return nil, errors.New("kubelet pod-resources socket: empty path")
	}
	abs, err := filepath.Abs(socketPath)
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources socket %q: %w", socketPath, err)
	}
	// Redial a restarting kubelet within a tenth of a second, not gRPC's
	// default of one.
	redial := backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}
	conn, err := grpc.NewClient("unix://"+abs,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageSize), grpc.WaitForReady(true)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: redial, MinConnectTimeout: time.Second}),
	)
	if err != nil {
		return nil, fmt.Errorf("kubelet pod-resources API at %s: %w", socketPath, err)
	}
	c := &Client{socket: socketPath, conn: conn, api: v1.NewPodResourcesListerClient(conn)}
	if err := c.waitReady(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect to kubelet pod-resources API at %s: %w", socketPath, err)
	}
	return c, nil
}

func (c *Client) waitReady(ctx context.Context) error {
	c.conn.Connect()
	for state := c.conn.GetState(); state != connectivity.Ready; state = c.conn.GetState() {
		if !c.conn.WaitForStateChange(ctx, state) {
			if _, err := os.Stat(c.socket); err != nil {
				return err // the likeliest reason, and more telling than ctx's
			}
			return ctx.Err()
		}
	}
	return nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// List returns the resources of every active pod.
func (c *Client) List(ctx context.Context) ([]Pod, error) {
	resp, err := call(ctx, func(ctx context.Context) (*v1.ListPodResourcesResponse, error) {
		return c.api.List(ctx, &v1.ListPodResourcesRequest{})
	})
	if err != nil {
		return nil, fmt.Errorf("list pod resources: %w", err)
	}
	pods := make([]Pod, 0, len(resp.GetPodResources()))
	for _, p := range resp.GetPodResources() {
		pods = append(pods, toPod(p))
	}
	return pods, nil
}

// Get returns the resources of one pod, or an error wrapping
// ErrPodNotFound. Where kubelet does not serve Get, it lists every pod
// instead, from then on.
func (c *Client) Get(ctx context.Context, namespace, name string) (Pod, error) {
	if !c.listOnly.Load() {
		resp, err := call(ctx, func(ctx context.Context) (*v1.GetPodResourcesResponse, error) {
			return c.api.Get(ctx, &v1.GetPodResourcesRequest{PodNamespace: namespace, PodName: name})
		})
		switch {
		case err == nil && resp.GetPodResources() != nil:
			return toPod(resp.GetPodResources()), nil
		case err == nil || isNotFound(err, namespace, name):
			return Pod{}, fmt.Errorf("pod %s/%s: %w", namespace, name, ErrPodNotFound)
		case !isGetUnsupported(err):
			return Pod{}, fmt.Errorf("get resources of pod %s/%s: %w", namespace, name, err)
		}
		c.listOnly.Store(true)
	}
	pods, err := c.List(ctx)
	if err != nil {
		return Pod{}, err
	}
	for _, p := range pods {
		if p.Namespace == namespace && p.Name == name {
			return p, nil
		}
	}
	return Pod{}, fmt.Errorf("pod %s/%s: %w", namespace, name, ErrPodNotFound)
}

// Allocated maps the ID of every device of resourceName that kubelet
// allocated to an active pod to the container holding it.
func (c *Client) Allocated(ctx context.Context, resourceName string) (map[string]PodRef, error) {
	pods, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	allocated := map[string]PodRef{}
	for _, p := range pods {
		for _, ctr := range p.Containers {
			for _, id := range ctr.Devices[resourceName] {
				allocated[id] = PodRef{Namespace: p.Namespace, Name: p.Name, Container: ctr.Name}
			}
		}
	}
	return allocated, nil
}

// PodDevices returns the devices of resourceName allocated to the pod,
// per container in the pod's order, leaving out containers with none.
func (c *Client) PodDevices(ctx context.Context, namespace, name, resourceName string) ([]ContainerDevices, error) {
	pod, err := c.Get(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	var devices []ContainerDevices
	for _, ctr := range pod.Containers {
		if ids := ctr.Devices[resourceName]; len(ids) > 0 {
			devices = append(devices, ContainerDevices{Container: ctr.Name, IDs: ids})
		}
	}
	return devices, nil
}

func toPod(p *v1.PodResources) Pod {
	pod := Pod{Namespace: p.GetNamespace(), Name: p.GetName(), Containers: make([]Container, 0, len(p.GetContainers()))}
	for _, c := range p.GetContainers() {
		ctr := Container{Name: c.GetName()}
		for _, d := range c.GetDevices() {
			if ctr.Devices == nil {
				ctr.Devices = map[string][]string{}
			}
			// kubelet reports devices with their NUMA node, in one entry
			// per device or per node, so one resource spans several.
			ctr.Devices[d.GetResourceName()] = append(ctr.Devices[d.GetResourceName()], d.GetDeviceIds()...)
		}
		for resource, ids := range ctr.Devices {
			slices.Sort(ids)
			ctr.Devices[resource] = slices.Compact(ids)
		}
		pod.Containers = append(pod.Containers, ctr)
	}
	return pod
}

// call calls rpc until kubelet answers it, waiting longer after each
// try, for as long as ctx allows. It tries again when kubelet's rate limit
// turned the call away (ResourceExhausted) and when the connection broke
// under it (Unavailable): a restarting kubelet drops calls in flight, and
// the next try waits for the new one. Every call of this API only reads.
func call[T any](ctx context.Context, rpc func(context.Context) (T, error)) (T, error) {
	delay := firstRetryDelay
	var refused error
	for {
		resp, err := rpc(ctx)
		if code := status.Code(err); code != codes.ResourceExhausted && code != codes.Unavailable {
			if err != nil && refused != nil && ctx.Err() != nil {
				// The deadline ended a retry: say why it was retrying.
				return resp, fmt.Errorf("%w while retrying: %w", ctx.Err(), refused)
			}
			return resp, err
		}
		refused = err
		select {
		case <-time.After(delay/2 + rand.N(delay)):
		case <-ctx.Done():
			return resp, fmt.Errorf("%w while retrying: %w", ctx.Err(), err)
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

// getDisabled is kubelet's answer to Get while its feature gate
// KubeletPodResourcesGet is off: an error of no particular code.
const getDisabled = "PodResources API Get method disabled"

func isGetUnsupported(err error) bool {
	s := status.Convert(err)
	return s.Code() == codes.Unimplemented || (s.Code() == codes.Unknown && s.Message() == getDisabled)
}

// isNotFound recognises kubelet's answer to Get for a pod it does not
// know: before codes were used, an error of no particular code.
func isNotFound(err error, namespace, name string) bool {
	s := status.Convert(err)
	return s.Code() == codes.NotFound ||
		(s.Code() == codes.Unknown && s.Message() == fmt.Sprintf("pod %s in namespace %s not found", name, namespace))
}
