package deviceplugin

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// pluginOptions is what the plugin tells kubelet it supports.
func pluginOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}
}

// GetDevicePluginOptions tells kubelet to ask for preferred allocations
// and not to call PreStartContainer.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return pluginOptions(), nil
}

// ListAndWatch sends the device list at once and again whenever
// SetDevices changes what kubelet sees, until the stream ends.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	ctx := stream.Context()
	for {
		s := p.current.Load()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: p.listings(s.devices)}); err != nil {
			return err
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return nil
		}
	}
}

// GetPreferredAllocation answers each container's request with
// Layout.Prefer.
func (p *Plugin) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	layout := p.current.Load().layout
	resp := &pluginapi.PreferredAllocationResponse{
		ContainerResponses: make([]*pluginapi.ContainerPreferredAllocationResponse, len(req.ContainerRequests)),
	}
	for i, c := range req.ContainerRequests {
		ids, err := layout.Prefer(PreferenceRequest{
			Available:   c.AvailableDeviceIDs,
			MustInclude: c.MustIncludeDeviceIDs,
			Size:        int(c.AllocationSize),
			Policy:      p.res.Policy,
		})
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: preferred allocation: %v", p.name, err)
		}
		resp.ContainerResponses[i] = &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids}
	}
	return resp, nil
}

// PreStartContainer does nothing: the plugin does not ask for it.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}
