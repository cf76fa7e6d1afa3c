package deviceplugin

import (
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/handout"
)

// Allocate hands each container its devices: their device nodes, the
// variable PCIDEVICE_<PREFIX>_<NAME> with their PCI addresses sorted and
// comma-separated, and PCIDEVICE_<PREFIX>_<NAME>_INFO with a JSON object
// of each device's details by device ID, as the SR-IOV network device
// plugin sets them. It writes each device's information file before it
// answers, for the CNI side. A device ID that is not one of the pool's
// fails the request with InvalidArgument.
func (p *Plugin) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	s := p.current.Load()
	resp := &pluginapi.AllocateResponse{
		ContainerResponses: make([]*pluginapi.ContainerAllocateResponse, len(req.ContainerRequests)),
	}
	for i, c := range req.ContainerRequests {
		devs, err := s.lookup(c.DevicesIds)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: allocate: %v", p.name, err)
		}
		if resp.ContainerResponses[i], err = p.containerResponse(devs); err != nil {
			return nil, status.Errorf(codes.Internal, "%s: allocate: %v", p.name, err)
		}
	}
	p.logAllocation(resp)
	if p.opts.Allocated != nil {
		p.opts.Allocated()
	}
	return resp, nil
}

// lookup returns the devices of ids sorted by ID.
func (s *snapshot) lookup(ids []string) ([]*DeviceState, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("a container request without devices")
	}
	sorted := slices.Sorted(slices.Values(ids))
	devs := make([]*DeviceState, len(sorted))
	for i, id := range sorted {
		if i > 0 && id == sorted[i-1] {
			return nil, fmt.Errorf("device %q requested twice", id)
		}
		d, ok := s.device(id)
		if !ok {
			return nil, fmt.Errorf("device %q is not a device of the pool", id)
		}
		devs[i] = d
	}
	return devs, nil
}

func (p *Plugin) containerResponse(devs []*DeviceState) (*pluginapi.ContainerAllocateResponse, error) {
	hs := make([]*handout.Device, len(devs))
	var specs []*pluginapi.DeviceSpec
	for i, d := range devs {
		hs[i] = p.maker.Make(&d.Device)
		for _, node := range hs[i].Nodes {
			if !slices.ContainsFunc(specs, func(s *pluginapi.DeviceSpec) bool { return s.HostPath == node }) {
				specs = append(specs, &pluginapi.DeviceSpec{HostPath: node, ContainerPath: node, Permissions: "rw"})
			}
		}
		if err := devinfo.Write(p.opts.DevinfoDir, p.name, d.ID, hs[i].Info); err != nil {
			return nil, err
		}
	}
	envs, err := handout.EnvVars(&p.res, hs)
	if err != nil {
		return nil, err
	}
	return &pluginapi.ContainerAllocateResponse{Envs: envs, Devices: specs}, nil
}

// containerAllocation is what a log line says a container got.
type containerAllocation struct {
	Devices     string   `json:"devices"`
	DeviceNodes []string `json:"deviceNodes,omitempty"`
}

func (p *Plugin) logAllocation(resp *pluginapi.AllocateResponse) {
	containers := make([]containerAllocation, len(resp.ContainerResponses))
	for i, c := range resp.ContainerResponses {
		containers[i].Devices = c.Envs[p.envList]
		for _, spec := range c.Devices {
			containers[i].DeviceNodes = append(containers[i].DeviceNodes, spec.ContainerPath)
		}
	}
	p.log.Info("allocated", "env", p.envList, "containers", containers)
}
