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
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
)

// Allocate hands each container its devices: their device nodes, the
// variable PCIDEVICE_<PREFIX>_<NAME> with their PCI addresses sorted and
// comma-separated, and PCIDEVICE_<PREFIX>_<NAME>_INFO with a JSON object
// of each device's details by device ID, as the SR-IOV network device
// plugin sets them. It reserves the devices in the device ledger first,
// then writes each device's information file, for the CNI side, before it
// answers. A device ID that is not one of the pool's fails the request
// with InvalidArgument; a device the ledger refuses (another front end
// holds it, a fence withdraws it, who holds it is unknown, it is
// unhealthy) with FailedPrecondition naming the device and why, which
// kubelet shows on the pod.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	s := p.current.Load()
	resp := &pluginapi.AllocateResponse{
		ContainerResponses: make([]*pluginapi.ContainerAllocateResponse, len(req.ContainerRequests)),
	}
	perContainer := make([][]*offer.State, len(req.ContainerRequests))
	var ids []string
	for i, c := range req.ContainerRequests {
		devs, err := s.lookup(c.DevicesIds)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%s: allocate: %v", p.name, err)
		}
		if err := s.checkCDI(devs); err != nil {
			return nil, status.Errorf(codes.FailedPrecondition, "%s: allocate: %v", p.name, err)
		}
		perContainer[i] = devs
		ids = append(ids, c.DevicesIds...)
	}
	hold := ledger.Request{Devices: ids, Holder: ledger.Holder{Kind: ledger.Pod, Resource: p.name}}
	if err := p.opts.Ledger.Reserve(ctx, hold); err != nil {
		p.log.Warn("allocation refused", "devices", ids, "err", err)
		return nil, status.Errorf(codes.FailedPrecondition, "%s: allocate: %v", p.name, err)
	}
	for i, devs := range perContainer {
		var err error
		if resp.ContainerResponses[i], err = p.containerResponse(devs); err != nil {
			return nil, status.Errorf(codes.Internal, "%s: allocate: %v", p.name, err)
		}
	}
	p.logAllocation(resp)
	return resp, nil
}

// lookup returns the devices of ids sorted by ID.
func (s *snapshot) lookup(ids []string) ([]*offer.State, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("a container request without devices")
	}
	sorted := slices.Sorted(slices.Values(ids))
	devs := make([]*offer.State, len(sorted))
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

func (p *Plugin) containerResponse(devs []*offer.State) (*pluginapi.ContainerAllocateResponse, error) {
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
	if p.res.CDI {
		return &pluginapi.ContainerAllocateResponse{Envs: envs, CdiDevices: p.cdiDevices(devs)}, nil
	}
	return &pluginapi.ContainerAllocateResponse{Envs: envs, Devices: specs}, nil
}

// checkCDI refuses, in a pool with CDI, a device whose entry in the spec
// on disk is not the device as the snapshot lists it: the runtime would
// fail the container, or give it another device's nodes.
func (s *snapshot) checkCDI(devs []*offer.State) error {
	if s.cdi == nil {
		return nil
	}
	for _, d := range devs {
		if !s.cdi.holds(d) {
			return fmt.Errorf("device %s: its entry in the pool's CDI spec is not written", d.ID)
		}
	}
	return nil
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
