package dra

import (
	"context"

	resourceapi "k8s.io/api/resource/v1"
)

// NewUnregistered is a driver that kubelet does not know, for calling
// prepare and unprepare directly.
func NewUnregistered(opts Options) (*Driver, error) { return newDriver(opts) }

// SetDevices makes ps the devices prepare hands out, as Publish does.
func (d *Driver) SetDevices(node Node, ps []Pool) error {
	_, err := d.update(node, ps)
	return err
}

// Republish is what kubelet's registration and a deleted slice trigger.
func (d *Driver) Republish(ctx context.Context) { d.republish(ctx) }

// RecoverUnfinished is what Start does before kubelet can call.
func (d *Driver) RecoverUnfinished(ctx context.Context) error { return d.recoverUnfinished(ctx) }

// ForgetEarlierBoot is what Start does first with the checkpoint.
func (d *Driver) ForgetEarlierBoot() error { return d.forgetEarlierBoot() }

// Devices maps the pools' devices to ResourceSlice devices, all of them
// at once, as the slices made one by one list them: sorted by
// pool order and then PCI address so that slices stay stable. A device
// in two pools is an error naming both: one device is served once.
func Devices(node Node, ps []Pool) ([]resourceapi.Device, error) {
	l, err := newLayout(node, ps)
	if err != nil {
		return nil, err
	}
	return l.devices(l.order), nil
}
