// Package testkubelet is the kubelet side of the device plugin and
// PodResources protocols, over real gRPC on unix sockets, for tests of
// hwnet-agent without a cluster. It does what kubelet's device manager
// does with a plugin: accept Register, connect back, keep the latest
// ListAndWatch list per resource, and call Allocate and
// GetPreferredAllocation. Restart behaves as a kubelet restart does: every
// socket in the directory is removed and kubelet.sock comes back.
package testkubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Kubelet serves the Registration service on Dir/kubelet.sock.
type Kubelet struct {
	Dir string

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	server    *grpc.Server
	plugins   map[string]*plugin // by resource name
	registers []*pluginapi.RegisterRequest
}

// plugin is a registered device plugin as kubelet tracks it.
type plugin struct {
	conn    *grpc.ClientConn
	client  pluginapi.DevicePluginClient
	options *pluginapi.DevicePluginOptions
	devices []*pluginapi.Device
	first   []*pluginapi.Device
	lists   int // ListAndWatch responses received
	// ended says its ListAndWatch stream ended: the plugin stopped.
	ended  bool
	cancel context.CancelFunc
}

// Start serves kubelet.sock in dir, creating dir if needed.
func Start(dir string) (*Kubelet, error) {
	k := &Kubelet{Dir: dir, changed: make(chan struct{}), plugins: map[string]*plugin{}}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return k, k.listen()
}

func (k *Kubelet) listen() error {
	l, err := net.Listen("unix", filepath.Join(k.Dir, "kubelet.sock"))
	if err != nil {
		return fmt.Errorf("test kubelet: %w", err)
	}
	// stop removes the socket itself: a Serve that starts only after Stop
	// closes its listener then, which would unlink the restarted socket.
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, registration{k: k})
	k.mu.Lock()
	k.server = s
	k.mu.Unlock()
	go s.Serve(l) //nolint:errcheck // ends with Stop
	return nil
}

// Close stops serving and disconnects from every plugin.
func (k *Kubelet) Close() { k.stop() }

func (k *Kubelet) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.server.Stop()
	os.Remove(filepath.Join(k.Dir, "kubelet.sock"))
	for name, p := range k.plugins {
		p.cancel()
		p.conn.Close()
		delete(k.plugins, name)
	}
	k.notify()
}

// Restart does what a restarting kubelet does: it forgets its plugins,
// removes every file in the directory, and serves kubelet.sock anew.
func (k *Kubelet) Restart() error {
	k.stop()
	entries, err := os.ReadDir(k.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(k.Dir, e.Name())); err != nil {
			return err
		}
	}
	return k.listen()
}

// notify wakes waiters; k.mu must be held.
func (k *Kubelet) notify() {
	close(k.changed)
	k.changed = make(chan struct{})
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	k *Kubelet
}

func (r registration) Register(ctx context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	if req.Version != pluginapi.Version {
		return nil, fmt.Errorf("unsupported device plugin API version %q", req.Version)
	}
	if err := r.k.connect(req); err != nil {
		return nil, err
	}
	return &pluginapi.Empty{}, nil
}

// connect dials the plugin back, as kubelet does on registration, and
// follows its ListAndWatch stream.
func (k *Kubelet) connect(req *pluginapi.RegisterRequest) error {
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.Dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	client := pluginapi.NewDevicePluginClient(conn)
	ctx, cancel := context.WithCancel(context.Background())
	opts, err := client.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		cancel()
		conn.Close()
		return fmt.Errorf("GetDevicePluginOptions of %s: %w", req.ResourceName, err)
	}
	p := &plugin{conn: conn, client: client, options: opts, cancel: cancel}
	k.mu.Lock()
	if old, ok := k.plugins[req.ResourceName]; ok {
		old.cancel()
		old.conn.Close()
	}
	k.plugins[req.ResourceName] = p
	k.registers = append(k.registers, req)
	k.notify()
	k.mu.Unlock()
	go k.follow(ctx, req.ResourceName, p)
	return nil
}

func (k *Kubelet) follow(ctx context.Context, resource string, p *plugin) {
	defer func() {
		k.mu.Lock()
		p.ended = true
		k.notify()
		k.mu.Unlock()
	}()
	stream, err := p.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return
		}
		k.mu.Lock()
		p.devices = resp.Devices
		if p.lists == 0 {
			p.first = resp.Devices
		}
		p.lists++
		k.notify()
		k.mu.Unlock()
	}
}

// Registrations returns every Register request received so far.
func (k *Kubelet) Registrations() []*pluginapi.RegisterRequest {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]*pluginapi.RegisterRequest(nil), k.registers...)
}

// State is what kubelet knows of one resource.
type State struct {
	Registered bool
	Options    *pluginapi.DevicePluginOptions
	Devices    []*pluginapi.Device
	// First is the first list received since registration.
	First []*pluginapi.Device
	// Lists counts the ListAndWatch responses received since registration.
	Lists int
	// Ended says the plugin's ListAndWatch stream ended since: it stopped.
	Ended bool
}

// Healthy counts the healthy devices: the node's allocatable.
func (s State) Healthy() int {
	n := 0
	for _, d := range s.Devices {
		if d.Health == pluginapi.Healthy {
			n++
		}
	}
	return n
}

// Device returns the listed device with this ID.
func (s State) Device(id string) (*pluginapi.Device, bool) {
	for _, d := range s.Devices {
		if d.ID == id {
			return d, true
		}
	}
	return nil, false
}

// Resource returns what kubelet knows of the resource now.
func (k *Kubelet) Resource(name string) State {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.stateLocked(name)
}

func (k *Kubelet) stateLocked(name string) State {
	p, ok := k.plugins[name]
	if !ok {
		return State{}
	}
	return State{Registered: true, Options: p.options, Devices: p.devices, First: p.first, Lists: p.lists, Ended: p.ended}
}

// Wait blocks until cond holds for the resource, or ctx ends; the error
// then says what kubelet last saw.
func (k *Kubelet) Wait(ctx context.Context, name string, cond func(State) bool) (State, error) {
	for {
		k.mu.Lock()
		st, changed := k.stateLocked(name), k.changed
		k.mu.Unlock()
		if cond(st) {
			return st, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return st, fmt.Errorf("resource %s: registered=%t, %d devices (%d healthy) after %d lists: %w",
				name, st.Registered, len(st.Devices), st.Healthy(), st.Lists, ctx.Err())
		}
	}
}

// client returns the connection to the resource's plugin.
func (k *Kubelet) client(name string) (pluginapi.DevicePluginClient, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.plugins[name]
	if !ok {
		return nil, fmt.Errorf("resource %s is not registered", name)
	}
	return p.client, nil
}

// Allocate asks the resource's plugin for one container's devices.
func (k *Kubelet) Allocate(ctx context.Context, name string, ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	c, err := k.client(name)
	if err != nil {
		return nil, err
	}
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, fmt.Errorf("allocate: %d container responses for 1 request", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0], nil
}

// Preferred asks the resource's plugin which size devices it prefers.
func (k *Kubelet) Preferred(ctx context.Context, name string, available, mustInclude []string, size int) ([]string, error) {
	c, err := k.client(name)
	if err != nil {
		return nil, err
	}
	resp, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size),
	}}})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		return nil, errors.New("preferred allocation: not one container response")
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// WaitTimeout is a Wait bounded by d.
func (k *Kubelet) WaitTimeout(d time.Duration, name string, cond func(State) bool) (State, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return k.Wait(ctx, name, cond)
}
