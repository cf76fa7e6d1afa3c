package delegate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/node/devinfo"
)

// del tears down every attachment of the container, in reverse, past
// failures (NPWG 7.2). It needs only the on-disk record: not the pod, the
// NetworkAttachmentDefinitions or the API server. DEL of a container hwnet
// holds nothing for succeeds, as the CNI specification requires, once the
// default network the runtime may have attached it to itself is deleted.
func (d *Delegator) del(ctx context.Context, c *call) error {
	unlock, err := c.store.Lock(ctx, c.req.ContainerID)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := c.store.Load(c.req.ContainerID)
	if errors.Is(err, os.ErrNotExist) {
		return d.delRuntimeAttached(ctx, c)
	}
	if errors.Is(err, attachments.ErrUnreadable) {
		return d.delUntrusted(ctx, c, nil, err)
	}
	if err != nil {
		return err
	}
	if doubt := attachments.Doubtful(rec); doubt != nil {
		return d.delUntrusted(ctx, c, rec, doubt)
	}
	return d.deleteRecord(ctx, c, rec)
}

// delRuntimeAttached is DEL of a container hwnet keeps no record of: one
// hwnet deleted already, or one the default network holds though hwnet
// has no record of it, which only the runtime's libcni cache tells of
// (attachments.RuntimeCache).
func (d *Delegator) delRuntimeAttached(ctx context.Context, c *call) error {
	if c.conf.DefaultNetwork == "" {
		return nil
	}
	def, err := d.configs.loadFile(c.conf.DefaultNetwork)
	if err != nil {
		d.opts.Logger.Warn("no record and no default network to delete the container from", "container", c.req.ContainerID, "err", err)
		return nil
	}
	rt := chain.Runtime{ContainerID: c.req.ContainerID, Netns: c.req.Netns, IfName: c.req.IfName}
	warn := d.passedOver(&attachmentapi.Record{ContainerID: c.req.ContainerID, PodNamespace: c.pod.ref.Namespace, PodName: c.pod.ref.Name})
	rc := attachments.RuntimeCache{Dir: c.conf.RuntimeCacheDir, Own: c.conf.Name, Default: def}
	deleted, err := rc.Delete(ctx, c.chain, rt, warn)
	if deleted && err == nil {
		d.opts.Logger.Info("deleted the default network from the runtime's cache: no record", "container", c.req.ContainerID, "network", def.Name)
	}
	return err
}

// delUntrusted tears down what can be known when the container's record
// cannot be trusted: unreadable (rec nil), of a newer format or invalid
// (attachments.Doubtful). It runs the DEL of whatever attachments of rec
// parse, then the default network's, from the current configuration, and
// releases the devices named in the container's CNI device-info files.
// The record goes, so the pod terminates instead of waiting on a DEL
// that fails the same way at every retry (a rollback would wedge every pod
// the newer agent attached); what could not be undone (the unparsed
// networks' plugins, their IPAM leases) is logged. Only a failed DEL of the
// default network fails the call, and keeps the record for a retry.
func (d *Delegator) delUntrusted(ctx context.Context, c *call, rec *attachmentapi.Record, cause error) error {
	var left []error
	def := &attachmentapi.Record{ContainerID: c.req.ContainerID, Netns: c.req.Netns}
	if rec != nil {
		if err := attachments.DeleteAll(ctx, c.chain, rec, d.passedOver(rec)); err != nil {
			left = append(left, err)
		}
		if err := d.resetVFs(ctx, c.store, rec); err != nil {
			left = append(left, err)
		}
		def.PodNamespace, def.PodName, def.PodUID = rec.PodNamespace, rec.PodName, rec.PodUID
	}
	if err := d.deleteDefault(ctx, c, def); err != nil {
		return errors.Join(cause, err)
	}
	files, err := d.devinfoFiles(c)
	if err != nil {
		left = append(left, err)
	}
	for _, f := range files {
		if err := d.releaseDevice(ctx, c, f); err != nil {
			left = append(left, err)
		}
		os.Remove(f.Path) // best effort: what is left is said below
	}
	d.opts.Logger.Warn("attachment record not trusted: tore down what it could, the default network from the current configuration, "+
		"released the devices its device-info files name and removed the record and those files; what it could not undo is in left",
		"container", c.req.ContainerID, "err", cause, "left", errors.Join(left...))
	return nil
}

// devinfoFiles are the container's CNI device-info files, by the parsed
// container ID of their names: a name that could also be the file of a
// container with a record (its ID ends with this one's, "x-a" and "a") is
// left to that container, whose device it may be.
func (d *Delegator) devinfoFiles(c *call) ([]devinfo.CNIFile, error) {
	ids, err := c.store.List()
	if err != nil {
		return nil, fmt.Errorf("device-info files not released: which containers hold records is unknown: %w", err)
	}
	recorded := func(id string) bool { return slices.Contains(ids, id) }
	return devinfo.CNIFiles(d.opts.CNIDevinfoDir, c.req.ContainerID, recorded)
}

// deleteDefault runs the default network's DEL, from the current
// configuration, as the only attachment of rec, which then goes.
func (d *Delegator) deleteDefault(ctx context.Context, c *call, rec *attachmentapi.Record) error {
	def, err := d.defaultAttachment(c)
	if err != nil {
		return err
	}
	entry, _, err := d.prepareEntry(ctx, c, def)
	if err != nil {
		return err
	}
	rec.Attachments = []attachmentapi.Attachment{entry}
	return d.deleteRecord(ctx, c, rec)
}

// releaseDevice gives the PCI device a device-info file of the container
// names back to the node, the one thing known of a secondary attachment
// without its record: a host-device DEL by PCI address on the file's
// interface, which moves the netdev back and restores its name from the
// alias host-device keeps. A device without a netdev (vfio-pci) needs
// nothing.
func (d *Delegator) releaseDevice(ctx context.Context, c *call, file devinfo.CNIFile) error {
	info, err := devinfo.ReadFile(file.Path)
	if err != nil || info.PCI == nil {
		return err
	}
	ifName := file.IfName
	conf, err := json.Marshal(hostDeviceRelease{CNIVersion: "1.0.0", Name: "hwnet-release", Type: "host-device", PCIBusID: info.PCI.PCIAddress})
	if err != nil {
		return err
	}
	list, err := netconf.Parse(conf, "", "")
	if err != nil {
		return err
	}
	rt := chain.Runtime{ContainerID: c.req.ContainerID, Netns: c.req.Netns, IfName: ifName}
	if err := c.chain.Del(ctx, list, rt, nil); err != nil {
		return fmt.Errorf("release device %s (%s): %w", info.PCI.PCIAddress, ifName, err)
	}
	return nil
}

// hostDeviceRelease is the host-device configuration releaseDevice runs.
type hostDeviceRelease struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	PCIBusID   string `json:"pciBusID"`
}

// check runs CHECK for every attachment, the default network's included.
// Lists older than CNI 0.4.0, or that disable it, have no CHECK.
func (d *Delegator) check(ctx context.Context, c *call) error {
	unlock, err := c.store.Lock(ctx, c.req.ContainerID)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := c.store.Load(c.req.ContainerID)
	if err != nil {
		return fmt.Errorf("CHECK container %s: hwnet attached nothing to it: %w", c.req.ContainerID, err)
	}
	var errs []error
	for _, a := range rec.Attachments {
		if err := checkOne(ctx, c.chain, rec, a); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func checkOne(ctx context.Context, ch *chain.Chain, rec *attachmentapi.Record, a attachmentapi.Attachment) error {
	dl, err := attachments.Delegate(a)
	if err != nil {
		return err
	}
	if ok, _ := version.GreaterThanOrEqualTo(dl.CNIVersion, "0.4.0"); !ok {
		return nil
	}
	if err := ch.Check(ctx, dl, attachments.Runtime(rec, a), a.AddResult()); err != nil {
		return fmt.Errorf("CHECK network %s interface %s: %w", a.Network, a.IfName, err)
	}
	return nil
}

// statusCmd runs STATUS (CNI 1.1) for the default network and every network
// a container on this node is attached to, answering for a network from
// its last pass while the memo allows (Options.StatusReuse).
func (d *Delegator) statusCmd(ctx context.Context, c *call) error {
	lists, err := d.networksInUse(c)
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range lists {
		if err := d.statusMemo.Status(ctx, c.chain, l); err != nil {
			errs = append(errs, fmt.Errorf("STATUS network %s: %w", l.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, err.Error(), "")
	}
	return nil
}

// networksInUse are the distinct configuration lists of the default
// network and of every recorded attachment, by list name.
func (d *Delegator) networksInUse(c *call) ([]*netconf.Delegate, error) {
	def, err := d.defaultAttachment(c)
	if err != nil {
		return nil, err
	}
	lists := []*netconf.Delegate{def.delegate}
	recorded, err := d.recorded.get(c)
	for _, l := range recorded {
		if l.Name != def.delegate.Name {
			lists = append(lists, l)
		}
	}
	return lists, err
}
