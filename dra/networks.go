package dra

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/api/vfsettings"
)

// deviceConfig is what a device's hwnet configuration asks: its network
// element, nil for none, and its VF settings.
type deviceConfig struct {
	network json.RawMessage
	vf      vfsettings.Settings
	// driver is the driver the VF is bound to, "" for the one it has.
	driver string
}

// deviceNetworks gives each of a claim's devices its network element and
// VF settings from the hwnet configurations of the claim's allocation,
// none for a device no configuration covers. For each device the last
// configuration that applies to its request wins (the class's come before
// the claim's).
func (d *Driver) deviceNetworks(c *resourceapi.ResourceClaim, devs []claimDevice) ([]deviceConfig, error) {
	out := make([]deviceConfig, len(devs))
	winner := make([]int, len(devs))
	configs := c.Status.Allocation.Devices.Config
	for i, cd := range devs {
		winner[i] = -1
		for k, cfg := range configs {
			if cfg.Opaque != nil && cfg.Opaque.Driver == d.opts.DriverName && appliesTo(cfg.Requests, cd.result.Request) {
				winner[i] = k
			}
		}
	}
	for k, cfg := range configs {
		if err := d.configNetworks(c, k, cfg, winner, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// configNetworks parses configuration k and gives its element and VF
// settings to each device it won, in out.
func (d *Driver) configNetworks(c *resourceapi.ResourceClaim, k int, cfg resourceapi.DeviceAllocationConfiguration, winner []int, out []deviceConfig) error {
	if cfg.Opaque == nil || cfg.Opaque.Driver != d.opts.DriverName {
		return nil
	}
	source := fmt.Sprintf("ResourceClaim %s/%s: status.allocation.devices.config[%d] (from %s, requests [%s]) opaque.parameters",
		c.Namespace, c.Name, k, cfg.Source, strings.Join(cfg.Requests, ","))
	nw, err := netclaim.Parse(cfg.Opaque.Parameters.Raw, c.Namespace, source)
	if err != nil {
		return err
	}
	if err := d.checkVFPolicy(c, cfg, nw.VF, source); err != nil {
		return err
	}
	var mine []int
	for i, w := range winner {
		if w == k {
			mine = append(mine, i)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	elems, err := nw.ForDevices(len(mine), source)
	if err != nil {
		return err
	}
	for j, i := range mine {
		out[i] = deviceConfig{network: elems[j], vf: nw.VF, driver: nw.Driver}
	}
	return nil
}

// checkVFPolicy judges the VF settings of a configuration the claim gives
// by the claim's namespace; a DeviceClass's (FromClass) are the admin's
// and apply unchecked. Any other source is judged as the claim's.
func (d *Driver) checkVFPolicy(c *resourceapi.ResourceClaim, cfg resourceapi.DeviceAllocationConfiguration, s vfsettings.Settings, source string) error {
	if d.opts.VFPolicy == nil || cfg.Source == resourceapi.AllocationConfigSourceClass || s.IsZero() {
		return nil
	}
	if err := d.opts.VFPolicy.Check(c.Namespace, s, vfpolicy.ClaimSpelling); err != nil {
		return fmt.Errorf("%s: %w", source, err)
	}
	return nil
}

// appliesTo says whether a configuration for requests covers request: all
// requests when none is named; a request's subrequests ("vfs/fast") when
// the request is named.
func appliesTo(requests []string, request string) bool {
	if len(requests) == 0 {
		return true
	}
	parent, _, _ := strings.Cut(request, "/")
	return slices.Contains(requests, request) || slices.Contains(requests, parent)
}

// reservedPods are the UIDs of the pods a claim is reserved for.
func reservedPods(c *resourceapi.ResourceClaim) []string {
	var uids []string
	for _, r := range c.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" {
			uids = append(uids, string(r.UID))
		}
	}
	return uids
}

// PodDevices lists the devices of the claims prepared for the pod, from
// the checkpoint alone: claims ordered by namespace and name, each
// claim's devices in allocation order. A claim is the pod's when prepare
// saw it reserved for the pod or when the pod names it: kubelet prepares
// a shared claim once, for its first pod, so prepare never hears of the
// second.
func (d *Driver) PodDevices(_ context.Context, pod netclaim.Pod) ([]netclaim.Device, error) {
	var out []netclaim.Device
	err := d.store.view(func(cp *checkpoint.Checkpoint) { out = d.podDevices(cp, pod) })
	return out, err
}

// podDevices are the pod's devices in cp, which they share nothing with.
func (d *Driver) podDevices(cp *checkpoint.Checkpoint, pod netclaim.Pod) []netclaim.Device {
	var claims []netclaim.ClaimRef
	for uid, pc := range cp.Claims {
		if slices.Contains(pc.Pods, pod.UID) || (pc.Namespace == pod.Namespace && slices.Contains(pod.Claims, pc.Name)) {
			claims = append(claims, netclaim.ClaimRef{Namespace: pc.Namespace, Name: pc.Name, UID: string(uid)})
		}
	}
	slices.SortFunc(claims, func(a, b netclaim.ClaimRef) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	var out []netclaim.Device
	for _, ref := range claims {
		for _, dev := range cp.Claims[types.UID(ref.UID)].Devices {
			out = append(out, netclaim.Device{Claim: ref, Request: dev.Request, Driver: d.opts.DriverName, Pool: dev.Pool,
				Device: dev.Device, Resource: dev.Resource, PCIAddress: dev.PCIAddress, Network: slices.Clone(dev.Network), VF: appliedVF(dev.VF)})
		}
	}
	return out
}

// appliedVF is a copy of the VF settings a device's record says were
// applied, for the claim's status; nil when none were, or not all yet.
func appliedVF(r *vfsettings.Record) *vfsettings.Settings {
	if r == nil || !r.Applied {
		return nil
	}
	s := r.Settings
	return &s
}
