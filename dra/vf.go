package dra

import (
	"context"
	"errors"
	"fmt"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// vfRecord is what prepare will set on a device's VF, nil when its
// configuration asks nothing: the device must be a VF, and one with a
// netdev for an MTU or MAC. What the VF has now, read from its PF before
// the first change, is what unprepare puts back.
func (d *Driver) vfRecord(ctx context.Context, cd claimDevice, s vfsettings.Settings) (*vfsettings.Record, error) {
	if s.IsZero() {
		return nil, nil
	}
	dev := cd.entry.dev
	if d.opts.VFAdmin == nil {
		return nil, fmt.Errorf("device %s: its configuration has VF settings, and this agent sets none (--vf-admin)", dev.ID)
	}
	if dev.VFIndex < 0 || dev.PFName == "" {
		return nil, fmt.Errorf("device %s: VF settings are for a VF whose PF has a netdev, and %s is not one", dev.ID, dev.ID)
	}
	var orig vfsettings.Original
	if nd := dev.Function.Netdev; nd != nil {
		orig = vfsettings.Original{MAC: nd.HardwareAddr, MTU: nd.MTU}
	} else if s.MTU != nil || s.MAC != "" {
		return nil, fmt.Errorf("device %s: \"mtu\" and \"macAddress\" need the VF's netdev, and it has none (driver %q)", dev.ID, dev.Function.Driver)
	}
	vf := vfadmin.VF{PF: dev.PFName, PFPCIAddress: dev.PF, Index: dev.VFIndex, PCIAddress: dev.ID}
	r, err := vfadmin.NewRecord(ctx, d.opts.VFAdmin, vf, orig, s, nil)
	if err != nil {
		return nil, fmt.Errorf("device %s: %w", dev.ID, err)
	}
	return r, nil
}

// applyVFs sets the VF settings of pc's devices not set yet, after saving
// cp, which records them: an agent killed while setting them leaves a
// record that a retried prepare sets again and unprepare resets.
func (d *Driver) applyVFs(ctx context.Context, cp *checkpoint.Checkpoint, pc *checkpoint.Claim) error {
	var pending []*vfsettings.Record
	for _, dev := range pc.Devices {
		if dev.VF != nil && !dev.VF.Applied {
			pending = append(pending, dev.VF)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	if err := d.store.save(cp); err != nil {
		return err
	}
	for _, r := range pending {
		if err := vfadmin.Apply(ctx, d.opts.VFAdmin, vfadmin.Of(*r), r.Settings, nil); err != nil {
			return err
		}
		r.Applied = true
		d.log.Info("VF settings applied", "claim", pc.Namespace+"/"+pc.Name, "device", r.PCIAddress, "pf", r.PF, "vf", r.Index)
	}
	return nil
}

// resetVFs puts back what each VF had before the settings pc records,
// applied or not: all of them, whatever fails. A failure (a PF or VF
// netdev not back yet, ErrNotBack) keeps the claim in the checkpoint,
// holding its devices, until kubelet's next unprepare resets it.
func (d *Driver) resetVFs(ctx context.Context, pc *checkpoint.Claim) error {
	var errs []error
	for _, dev := range pc.Devices {
		if dev.VF == nil {
			continue
		}
		if d.opts.VFAdmin == nil {
			errs = append(errs, fmt.Errorf("device %s: VF settings to reset, and this agent sets none (--vf-admin)", dev.PCIAddress))
			continue
		}
		if err := vfadmin.Reset(ctx, d.opts.VFAdmin, *dev.VF); err != nil {
			errs = append(errs, err)
			continue
		}
		d.log.Info("VF settings reset", "claim", pc.Namespace+"/"+pc.Name, "device", dev.PCIAddress, "pf", dev.VF.PF, "vf", dev.VF.Index)
	}
	return errors.Join(errs...)
}
