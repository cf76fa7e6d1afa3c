package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/pcidriver"
)

// vfioDriver is the driver that hands a VF to user space (DPDK) through
// its IOMMU group's device node.
const vfioDriver = "vfio-pci"

// binder is how the driver rebinds VFs.
func (d *Driver) binder() pcidriver.Sysfs {
	return pcidriver.Sysfs{Root: d.opts.SysfsRoot, Settle: d.opts.RebindSettle}
}

// rebindOf is the driver change a device's configuration asks for, nil
// when none: no driver asked, or the VF is on it. It changes nothing: a
// driver the pool does not allow, one the node has not loaded, or vfio-pci
// for a VF without an IOMMU group is refused naming the device, the key
// and the value.
func (d *Driver) rebindOf(cd claimDevice, driver string) (*checkpoint.Rebind, error) {
	if driver == "" {
		return nil, nil
	}
	dev := cd.entry.dev
	fail := func(format string, args ...any) error {
		return fmt.Errorf("device %s: \"driver\" %q: %s", dev.ID, driver, fmt.Sprintf(format, args...))
	}
	if dev.VFIndex < 0 || dev.PF == "" {
		return nil, fail("only a VF is rebound, and it is no VF")
	}
	was, err := d.binder().Read(dev.ID)
	if err != nil {
		return nil, fail("%v", err)
	}
	if was.Driver == driver {
		return nil, nil
	}
	res := cd.entry.res
	if !slices.Contains(res.ClaimDrivers, driver) {
		if len(res.ClaimDrivers) == 0 {
			return nil, fail("pool %s rebinds no VF (its claimDrivers are empty); its VF is on %s", res.FullName(), was.Driver)
		}
		return nil, fail("pool %s allows claims only %s (claimDrivers)", res.FullName(), strings.Join(res.ClaimDrivers, ", "))
	}
	if _, err := os.Stat(filepath.Join(d.opts.SysfsRoot, "bus/pci/drivers", driver)); err != nil {
		return nil, fail("the node has no such driver loaded (%v)", err)
	}
	if driver == vfioDriver && dev.Function.IOMMUGroup == "" {
		return nil, fail("the VF has no IOMMU group: turn the IOMMU on (intel_iommu=on, amd_iommu=on)")
	}
	return &checkpoint.Rebind{Driver: driver, WasDriver: was.Driver, WasOverride: was.Override}, nil
}

// rebind binds the VF at addr to r's driver and waits for what the driver
// brings: vfio-pci's group device node.
func (d *Driver) rebind(ctx context.Context, cd claimDevice, r *checkpoint.Rebind) error {
	addr := cd.entry.dev.ID
	b := d.binder()
	if err := b.Unbind(ctx, addr, r.WasDriver); err != nil {
		return fmt.Errorf("device %s: \"driver\" %q: unbinding it from %s: %w", addr, r.Driver, r.WasDriver, err)
	}
	if err := b.Probe(ctx, addr, r.Driver); err != nil {
		return fmt.Errorf("device %s: \"driver\" %q: binding it: %w", addr, r.Driver, err)
	}
	if r.Driver != vfioDriver {
		return nil
	}
	group := d.vfioGroupNode(cd)
	err := b.Wait(ctx, group+" to appear", func() (bool, error) {
		_, err := os.Stat(group)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("device %s: \"driver\" %q: its IOMMU group: %w", addr, r.Driver, err)
	}
	return nil
}

// vfioGroupNode is the VF's IOMMU group device node under DevRoot.
func (d *Driver) vfioGroupNode(cd claimDevice) string {
	return filepath.Join(d.opts.DevRoot, "vfio", cd.entry.dev.Function.IOMMUGroup)
}

// restoreDriver puts a rebound VF back on what it was on.
func (d *Driver) restoreDriver(ctx context.Context, addr string, r *checkpoint.Rebind) error {
	err := d.binder().Restore(context.WithoutCancel(ctx), addr, pcidriver.Binding{Driver: r.WasDriver, Override: r.WasOverride})
	if err != nil {
		return fmt.Errorf("device %s: putting it back on %s: %w", addr, describeDriver(r.WasDriver), err)
	}
	return nil
}

// describeDriver names a driver in a message, "no driver" for none.
func describeDriver(driver string) string {
	if driver == "" {
		return "no driver"
	}
	return driver
}

// restoreDrivers puts every rebound VF of pc back, whatever fails.
func (d *Driver) restoreDrivers(ctx context.Context, pc *checkpoint.Claim) error {
	var errs []error
	for _, dev := range pc.Devices {
		if dev.Rebind == nil {
			continue
		}
		if err := d.restoreDriver(ctx, dev.PCIAddress, dev.Rebind); err != nil {
			errs = append(errs, err)
			continue
		}
		d.log.Info("VF driver restored", "claim", pc.Namespace+"/"+pc.Name, "device", dev.PCIAddress, "vfDriver", dev.Rebind.WasDriver)
	}
	return errors.Join(errs...)
}

// reboundHandout is what a VF bound to driver for a claim hands out: on
// vfio-pci its group's device node, and no netdev or RDMA device, which
// the driver took; on a netdev driver neither, as the CNI side finds the
// netdev by the PCI address.
func (d *Driver) reboundHandout(cd claimDevice, driver string) *handout.Device {
	dev := cd.entry.dev.Device
	fn := *dev.Function
	fn.Driver, fn.Netdev, fn.RDMA, fn.UIODevice, fn.VFIODevice = driver, nil, nil, "", ""
	if driver == vfioDriver {
		fn.VFIODevice = d.vfioGroupNode(cd)
	}
	dev.Function = &fn
	return handout.NewMaker(cd.entry.res, d.opts.DevRoot).Make(&dev)
}

// rebinds are the driver changes of a claim's devices, by device, nil
// where none; one refused fails the claim, naming it.
func (d *Driver) rebinds(c *resourceapi.ResourceClaim, devs []claimDevice, configs []deviceConfig) ([]*checkpoint.Rebind, error) {
	out := make([]*checkpoint.Rebind, len(devs))
	for i, cd := range devs {
		r, err := d.rebindOf(cd, configs[i].driver)
		if err == nil && r != nil && r.Driver == vfioDriver && (configs[i].vf.MTU != nil || configs[i].vf.MAC != "") {
			err = fmt.Errorf("device %s: \"driver\" %q: \"vf\" \"mtu\" and \"macAddress\" need the VF's netdev, which %s takes", cd.entry.dev.ID, r.Driver, r.Driver)
		}
		if err != nil {
			return nil, fmt.Errorf("ResourceClaim %s/%s: %w", c.Namespace, c.Name, err)
		}
		out[i] = r
	}
	return out, nil
}

// rebindClaim binds the claim's VFs to the drivers rebinds name, after
// saving the claim in cp, unfinished, so that an agent killed half way
// leaves a record of what to put back; each rebound device then hands out
// what its new driver brings. A failure puts every VF back and drops the
// record.
func (d *Driver) rebindClaim(ctx context.Context, cp *checkpoint.Checkpoint, c *resourceapi.ResourceClaim, devs []claimDevice, rebinds []*checkpoint.Rebind) error {
	if !slices.ContainsFunc(rebinds, func(r *checkpoint.Rebind) bool { return r != nil }) {
		return nil
	}
	pending := &checkpoint.Claim{Namespace: c.Namespace, Name: c.Name, CDISpec: d.specPath(c.UID), Unfinished: true, BootID: d.bootID}
	for i, cd := range devs {
		pending.Devices = append(pending.Devices, checkpoint.Device{Request: cd.result.Request, Pool: cd.result.Pool, Device: cd.result.Device,
			Resource: cd.entry.res.FullName(), PCIAddress: cd.entry.dev.ID, Rebind: rebinds[i]})
	}
	cp.Claims[c.UID] = pending
	if err := d.store.save(cp); err != nil {
		delete(cp.Claims, c.UID)
		return err
	}
	for i, cd := range devs {
		if rebinds[i] == nil {
			continue
		}
		if err := d.rebind(ctx, cd, rebinds[i]); err != nil {
			return d.unbindClaim(ctx, cp, c, fmt.Errorf("ResourceClaim %s/%s: %w", c.Namespace, c.Name, err))
		}
		d.log.Info("VF bound to the claim's driver", "claim", c.Namespace+"/"+c.Name, "device", cd.entry.dev.ID, "vfDriver", rebinds[i].Driver, "was", rebinds[i].WasDriver)
		devs[i].handout = d.reboundHandout(cd, rebinds[i].Driver)
	}
	return nil
}

// unbindClaim puts the claim's rebound VFs back after cause, and drops
// its record from cp (saved) once they are; a VF that cannot be put back
// keeps the record, which unprepare or the next start tries again.
func (d *Driver) unbindClaim(ctx context.Context, cp *checkpoint.Checkpoint, c *resourceapi.ResourceClaim, cause error) error {
	pc, ok := cp.Claims[c.UID]
	if !ok {
		return cause
	}
	if err := d.restoreDrivers(ctx, pc); err != nil {
		return fmt.Errorf("%w; putting its VFs back: %w", cause, err)
	}
	delete(cp.Claims, c.UID)
	if err := d.store.save(cp); err != nil {
		return fmt.Errorf("%w; its VFs are back, and dropping its record: %w", cause, err)
	}
	return fmt.Errorf("%w; its VFs are back on their drivers", cause)
}

// dropUnfinished puts back the VFs of a claim whose prepare did not end
// and drops it from cp, saved.
func (d *Driver) dropUnfinished(ctx context.Context, cp *checkpoint.Checkpoint, uid types.UID) error {
	pc := cp.Claims[uid]
	if err := d.restoreDrivers(ctx, pc); err != nil {
		return fmt.Errorf("ResourceClaim %s/%s, whose prepare did not end: %w", pc.Namespace, pc.Name, err)
	}
	delete(cp.Claims, uid)
	if err := d.store.save(cp); err != nil {
		return err
	}
	d.log.Info("claim whose prepare did not end dropped, its VFs back on their drivers", "claim", pc.Namespace+"/"+pc.Name)
	return nil
}

// recoverUnfinished undoes, at the driver's start, every prepare that did
// not end: a VF an agent killed while rebinding left half way goes back to
// what it was on before anything can hand it out again.
func (d *Driver) recoverUnfinished(ctx context.Context) error {
	cp, err := d.store.load()
	if err != nil {
		return err
	}
	var errs []error
	for uid, pc := range cp.Claims {
		if pc.Unfinished {
			errs = append(errs, d.dropUnfinished(ctx, cp, uid))
		}
	}
	return errors.Join(errs...)
}

// RestingBindings is Rebound, or none without a driver (DRA off) or when
// the checkpoint cannot be read, which the device ledger reports (it
// reads the same file): a PF's VF layout counts such VFs as they rest.
func (d *Driver) RestingBindings() map[string]pcidriver.Binding {
	if d == nil {
		return nil
	}
	r, err := d.Rebound()
	if err != nil {
		return nil
	}
	return r
}

// RestingDrivers is the driver of each of RestingBindings: the pools match
// those VFs by it, so that a claim's driver does not move its VF to
// another pool while the claim holds it.
func (d *Driver) RestingDrivers() map[string]string {
	out := map[string]string{}
	for addr, b := range d.RestingBindings() {
		out[addr] = b.Driver
	}
	return out
}

// Rebound is, by PCI address, the binding each VF a prepared claim has on
// another driver rests on.
func (d *Driver) Rebound() (map[string]pcidriver.Binding, error) {
	out := map[string]pcidriver.Binding{}
	err := d.store.view(func(cp *checkpoint.Checkpoint) {
		for _, pc := range cp.Claims {
			for _, dev := range pc.Devices {
				if r := dev.Rebind; r != nil && r.WasDriver != "" {
					out[dev.PCIAddress] = pcidriver.Binding{Driver: r.WasDriver, Override: r.WasOverride}
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
