package delegate

import (
	"context"
	"errors"
	"fmt"

	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/node/ledger"
)

// reserve takes the devices the attachments bind in the device ledger,
// before any is recorded or runs: the ADD of a device another pod, claim
// or sandbox holds, that a fence withdraws, whose holders are unknown or
// that is unhealthy fails, naming the device and why, and the pod's
// sandbox is retried by kubelet. One request per resource and claim, the
// hold's identity is the sandbox.
func (d *Delegator) reserve(ctx context.Context, c *call, pod cache.Pod, atts []attachment) error {
	reqs := map[[2]string]*ledger.Request{}
	var order [][2]string
	for _, a := range atts {
		if a.deviceID == "" {
			continue
		}
		key := [2]string{a.resource, a.claimUID()}
		r, ok := reqs[key]
		if !ok {
			h := ledger.Holder{Kind: ledger.Container, Resource: a.resource, Namespace: pod.Namespace, Name: pod.Name,
				Container: c.req.ContainerID, UID: key[1]}
			if pod.UID != "" {
				h.PodUIDs = []string{pod.UID}
			}
			r = &ledger.Request{Holder: h}
			reqs[key], order = r, append(order, key)
		}
		r.Devices = append(r.Devices, a.deviceID)
	}
	if len(order) == 0 {
		return nil
	}
	if d.opts.Ledger == nil {
		return podFailure("DeviceRefused", errors.New("no device ledger: devices are not handed out"))
	}
	for _, key := range order {
		if err := d.opts.Ledger.Reserve(ctx, *reqs[key]); err != nil {
			d.release(ctx, c.req.ContainerID)
			return podFailure("DeviceRefused", fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err))
		}
	}
	return nil
}

// release gives back the devices the container's attachments hold, once
// its record is gone.
func (d *Delegator) release(ctx context.Context, containerID string) {
	if d.opts.Ledger != nil {
		d.opts.Ledger.Release(ctx, ledger.Holder{Kind: ledger.Container, Container: containerID})
	}
}

// claimUID is the UID of the claim the attachment's device comes from,
// "" for a device plugin's.
func (a attachment) claimUID() string {
	if a.claimDevice == nil {
		return ""
	}
	return a.claimDevice.Claim.UID
}
