package delegate

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// vfRecord is what the attachment will set on its VF from its network's
// sriov-cni keys, with what the VF has now, read from its PF, for the
// reset; nil for nothing: a claimed device takes its settings from its
// claim, at prepare, instead.
func (d *Delegator) vfRecord(ctx context.Context, a attachment) (*vfsettings.Record, error) {
	if a.deviceID == "" || a.claimDevice != nil || a.delegate == nil {
		return nil, nil
	}
	s, err := a.delegate.VFSettings()
	if err != nil || s.IsZero() {
		return nil, err
	}
	if d.opts.VFAdmin == nil {
		return nil, fmt.Errorf("network %s: VF settings for device %s, and this agent sets none (--vf-admin)", a.network, a.deviceID)
	}
	vf, orig, err := vfadmin.Lookup(cmp.Or(d.opts.SysfsRoot, "/sys"), a.deviceID)
	if err != nil {
		return nil, fmt.Errorf("network %s: VF settings: %w", a.network, err)
	}
	if (s.MTU != nil || s.MAC != "") && orig == (vfsettings.Original{}) {
		return nil, fmt.Errorf("network %s: device %s: \"mtu\" and \"mac\" need the VF's netdev, and it has none", a.network, a.deviceID)
	}
	r, err := vfadmin.NewRecord(ctx, d.opts.VFAdmin, vf, orig, s, vfsettings.SRIOVCNINames)
	if err != nil {
		return nil, fmt.Errorf("network %s: %w", a.network, err)
	}
	return r, nil
}

// applyVF sets the attachment's VF settings, recorded on disk already,
// before its delegate moves the VF's netdev into the pod.
func (d *Delegator) applyVF(ctx context.Context, entry *attachmentapi.Attachment, a *attached) error {
	if entry.VF == nil {
		return nil
	}
	r := entry.VF
	if err := vfadmin.Apply(ctx, d.opts.VFAdmin, vfadmin.Of(*r), r.Settings, vfsettings.SRIOVCNINames); err != nil {
		return fmt.Errorf("network %s interface %s: %w", a.network, a.ifName, err)
	}
	a.vf = &r.Settings
	return nil
}

// resetVFs puts back what each VF had before the settings rec's
// attachments record, once their delegates gave the netdevs back: every
// one, whatever fails. A reset that fails (a netdev not back in the node's
// network namespace yet, no --vf-admin) is left pending under store, for
// the agent to retry while the device ledger withholds the VF; only
// failing to leave it fails the teardown, which keeps the record.
func (d *Delegator) resetVFs(ctx context.Context, store *attachments.Store, rec *attachmentapi.Record) error {
	var errs []error
	for _, a := range rec.Attachments {
		if a.VF == nil {
			continue
		}
		err := errors.New("this agent sets no VF settings (--vf-admin)")
		if d.opts.VFAdmin != nil {
			err = vfadmin.Reset(ctx, d.opts.VFAdmin, *a.VF)
		}
		if err == nil {
			continue
		}
		d.opts.Logger.Warn("VF settings reset failed: left pending, the VF stays out of every pool until it is done",
			"container", rec.ContainerID, "network", a.Network, "device", a.DeviceID, "err", err)
		reason := fmt.Sprintf("the reset at the teardown of container %s of pod %s/%s failed", rec.ContainerID, rec.PodNamespace, rec.PodName)
		if err := store.LeaveReset(*a.VF, reason); err != nil {
			errs = append(errs, fmt.Errorf("network %s interface %s: %w", a.Network, a.IfName, err))
		}
	}
	return errors.Join(errs...)
}

// checkVFPolicy judges the sriov-cni keys of the pod's networks by their
// NetworkAttachmentDefinition's namespace, before the ADD reserves,
// records or sets anything: hwnet's settings and those sriov-cni would set
// alike, on a claimed device too (whose claim's own settings were judged
// at prepare). The default network is the admin's; without a device
// nothing is set.
func (d *Delegator) checkVFPolicy(atts []attachment, podNamespace string) error {
	if d.opts.VFPolicy == nil {
		return nil
	}
	for _, a := range atts {
		if a.isDefault || a.deviceID == "" || a.delegate == nil {
			continue
		}
		s, err := a.delegate.VFKeys()
		if err != nil {
			return podFailure("InvalidVFSettings", fmt.Errorf("network %s: %w", a.network, err))
		}
		if err := d.opts.VFPolicy.Check(a.sel.Namespace, s, vfpolicy.NADSpelling); err != nil {
			return podFailure("VFSettingsRefused", fmt.Errorf("network %s: NetworkAttachmentDefinition %s/%s: %w", a.network, a.sel.Namespace, a.sel.Name, err))
		}
		// The pod's (or its claim's) own "mac" gives the VF an address
		// too, a gateway's as well as any: its namespace's rule must
		// grant macAddress.
		if a.sel.MAC == "" {
			continue
		}
		if err := d.opts.VFPolicy.Check(podNamespace, vfsettings.Settings{MAC: a.sel.MAC}, vfpolicy.NADSpelling); err != nil {
			return podFailure("VFSettingsRefused", fmt.Errorf("network %s: the pod's \"mac\": %w", a.network, err))
		}
	}
	return nil
}
