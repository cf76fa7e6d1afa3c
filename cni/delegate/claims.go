package delegate

import (
	"context"
	"fmt"
	"log/slog"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/node/devinfo"
)

// podClaims are the devices of a pod's prepared DRA claims: local state
// of the DRA driver, never the API server.
func (d *Delegator) podClaims(ctx context.Context, pod cache.Pod) ([]netclaim.Device, error) {
	if d.opts.Claims == nil || pod.UID == "" {
		return nil, nil
	}
	devs, err := d.opts.Claims.PodDevices(ctx, netclaim.Pod{UID: pod.UID, Namespace: pod.Namespace, Claims: pod.Claims})
	if err != nil {
		return nil, fmt.Errorf("DRA claims of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return devs, nil
}

// claimRequests are the attachments the pod's claims configure, one per
// claimed device with a network, after the annotation's: claims by
// namespace and name, each claim's devices in allocation order.
func (d *Delegator) claimRequests(ctx context.Context, pod cache.Pod, devs []netclaim.Device) ([]request, error) {
	sels, idx, err := netclaim.Selections(devs, pod.Namespace)
	if err != nil {
		return nil, podFailure("InvalidClaimNetworks", err)
	}
	reqs := make([]request, len(sels))
	for i, s := range sels {
		dev := &devs[idx[i]]
		reqs[i] = request{sel: s, claimDevice: dev}
		if pn := netclaim.PodNetworkOf(dev.Network); pn != "" {
			if reqs[i], err = d.claimPodNetwork(ctx, pod, s, dev); err != nil {
				return nil, err
			}
		}
	}
	return reqs, nil
}

// claimPodNetwork resolves a claimed device's element that names a
// KEP-3698 PodNetwork (netclaim.PodNetworkKey) to the network's
// NetworkAttachmentDefinition, as a pod's reference would be, keeping the
// element's own keys (interface, ips, mac, ...).
func (d *Delegator) claimPodNetwork(ctx context.Context, pod cache.Pod, s selection.Selection, dev *netclaim.Device) (request, error) {
	ref := mnv1.Network{Name: s.Name, InterfaceName: s.Interface, IsDefaultGW: s.HasDefaultRoute}
	if d.opts.PodNetworks == nil {
		return request{}, podFailure("NetworkNotFound", fmt.Errorf("claim %s: PodNetwork %s: this agent does not serve PodNetworks", dev.Claim, s.Name))
	}
	r, err := d.podNetworkRequest(ctx, pod.Namespace, ref)
	if err != nil {
		return request{}, fmt.Errorf("claim %s: %w", dev.Claim, err)
	}
	if r.podNetwork == mnv1.DefaultPodNetwork {
		return request{}, podFailure("InvalidClaimNetworks", fmt.Errorf(
			"claim %s: a claimed device cannot attach to the default PodNetwork, the cluster-wide default network", dev.Claim))
	}
	s.Namespace, s.Name = r.sel.Namespace, r.sel.Name
	return request{sel: s, claimDevice: dev, podNetwork: r.podNetwork, adminChosen: r.adminChosen}, nil
}

// spareClaimDevices are the claimed devices without a network of their
// own, by resource, in order: a NetworkAttachmentDefinition whose
// resourceName is a pool in DRA mode takes its device from them.
func spareClaimDevices(devs []netclaim.Device) map[string][]*netclaim.Device {
	out := map[string][]*netclaim.Device{}
	for i := range devs {
		if len(devs[i].Network) == 0 {
			out[devs[i].Resource] = append(out[devs[i].Resource], &devs[i])
		}
	}
	return out
}

// useClaimDevice makes a claimed device the attachment's: the device the
// claim holds, whatever the network's resourceName says.
func (a *attachment) useClaimDevice(dev *netclaim.Device) {
	a.claimDevice = dev
	a.deviceID = dev.PCIAddress
	a.resource = dev.Resource
}

// writeClaimStatus writes, per claim, the networkData of its devices the
// publication attached, with one write per claim.
func (d *Delegator) writeClaimStatus(ctx context.Context, p publication) {
	byClaim, order := claimStatuses(p, d.opts.Logger)
	for _, ref := range order {
		if err := d.opts.ClaimStatus.SetClaimDeviceStatus(ctx, ref, byClaim[ref]); err != nil {
			d.opts.Logger.Error("writing the claim's device status", "claim", ref.String(), "err", err)
		}
	}
}

// claimStatuses groups the claimed devices' status by claim, claims in
// order of first attachment.
func claimStatuses(p publication, logger *slog.Logger) (map[netclaim.ClaimRef][]netclaim.DeviceStatus, []netclaim.ClaimRef) {
	out := map[netclaim.ClaimRef][]netclaim.DeviceStatus{}
	var order []netclaim.ClaimRef
	for _, a := range p {
		dev := a.claimDevice
		if dev == nil {
			continue
		}
		st, err := status.FromResult(a.network, a.result, a.ifName)
		if err != nil {
			logger.Warn("claim device status from a result it cannot read", "network", a.network, "err", err)
			st = status.NetworkStatus{Interface: a.ifName}
		}
		if _, seen := out[dev.Claim]; !seen {
			order = append(order, dev.Claim)
		}
		out[dev.Claim] = append(out[dev.Claim], netclaim.DeviceStatus{Driver: dev.Driver, Pool: dev.Pool, Device: dev.Device,
			InterfaceName: st.Interface, IPs: st.IPs, HardwareAddress: st.MAC, Network: a.network, VF: dev.VF,
			Representor: representorOf(a.info)})
	}
	return out, order
}

// appliedVF is the VF settings applied to the attachment's device: by
// the DRA driver at prepare for a claimed device, from the network's keys
// otherwise.
func (a attached) appliedVF() *vfsettings.Settings {
	if a.claimDevice == nil {
		return a.vf
	}
	return a.claimDevice.VF
}

// representorOf is the representor netdev the device-info names, "" for
// none.
func representorOf(info *devinfo.DeviceInfo) string {
	switch {
	case info == nil:
		return ""
	case info.PCI != nil:
		return info.PCI.RepresentorDevice
	case info.VDPA != nil:
		return info.VDPA.RepresentorDevice
	}
	return ""
}
