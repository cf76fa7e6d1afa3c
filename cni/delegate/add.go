package delegate

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/selection"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/defaultroute"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/node/devinfo"
)

// rollbackTimeout bounds the cleanup of a failed ADD, which must run even
// when the request's own context has ended.
const rollbackTimeout = 2 * time.Minute

// attached is one attachment made, with what its status is built from.
type attached struct {
	attachment
	result types.Result
	// info is the device-info hwnet gave the delegate in infoFile.
	info     *devinfo.DeviceInfo
	infoFile string
	// vf is the VF settings hwnet set from the network's keys.
	vf *vfsettings.Settings
}

// add attaches the default network, then every selected one, in order
// (NPWG 6.2); the first failure stops it and undoes what was attached, in
// reverse (7.2).
func (d *Delegator) add(ctx context.Context, c *call) (json.RawMessage, error) {
	pod, err := d.pod(ctx, c)
	if err != nil {
		d.reportFailure(c, err)
		return nil, err
	}
	unlock, err := c.store.Lock(ctx, c.req.ContainerID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := d.clearLeftovers(ctx, c); err != nil {
		return nil, err
	}
	atts, err := d.prepare(ctx, c, pod)
	if err == nil {
		err = d.checkVFPolicy(atts, c.pod.ref.Namespace)
	}
	if err != nil {
		d.reportFailure(c, err)
		return nil, err
	}
	// Runtimes may leave K8S_POD_UID out; the status PATCH needs it.
	c.pod.ref.UID = pod.UID
	if err := d.reserve(ctx, c, pod, atts); err != nil {
		d.reportFailure(c, err)
		return nil, err
	}
	rec := &attachmentapi.Record{ContainerID: c.req.ContainerID, Netns: c.req.Netns,
		PodNamespace: pod.Namespace, PodName: pod.Name, PodUID: pod.UID}
	done, err := d.attachAll(ctx, c, rec, atts)
	if err == nil {
		err = applyDefaultRoute(ctx, c.req.Netns, done)
	}
	if err != nil {
		err = d.rollback(ctx, c, rec, len(done), err)
		d.reportFailure(c, err)
		return nil, err
	}
	d.publish(c, done)
	return defaultResult(done[0].result, c.conf.Version())
}

// clearLeftovers deletes what an earlier ADD of the same container left
// behind because its own rollback failed: ADD must start from nothing.
func (d *Delegator) clearLeftovers(ctx context.Context, c *call) error {
	rec, err := c.store.Load(c.req.ContainerID)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	d.opts.Logger.Info("deleting the attachments a failed ADD left", "container", c.req.ContainerID, "attachments", len(rec.Attachments))
	if err := d.deleteRecord(ctx, c, rec); err != nil {
		return fmt.Errorf("attachments left by an earlier ADD of container %s: %w", c.req.ContainerID, err)
	}
	return nil
}

// pod reads the pod the sandbox is for, the zero Pod for a request
// without one. A pod selecting networks has its devices asked of kubelet
// at once, so the answer comes while the lock is taken and the default
// network prepared rather than after.
func (d *Delegator) pod(ctx context.Context, c *call) (cache.Pod, error) {
	if !c.pod.isPod() {
		return cache.Pod{}, nil
	}
	waitCtx, cancel := context.WithTimeout(ctx, d.opts.PodWait)
	defer cancel()
	pod, err := d.opts.Pods.Pod(waitCtx, c.pod.ref)
	if err != nil {
		return cache.Pod{}, fmt.Errorf("pod %s/%s: %w", c.pod.ref.Namespace, c.pod.ref.Name, err)
	}
	if pod.Annotations[selection.Annotation] != "" {
		d.devices.prefetch(ctx, pod)
	}
	return pod, nil
}

// prepare plans the pod's attachments; the default network's comes first.
func (d *Delegator) prepare(ctx context.Context, c *call, pod cache.Pod) ([]attachment, error) {
	def, err := d.defaultAttachment(c)
	if err != nil {
		return nil, err
	}
	if !c.pod.isPod() {
		return []attachment{def}, nil
	}
	atts, err := d.plan(ctx, pod, c.req.IfName)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(pod.Annotations[mnv1.NetworksAnnotation]) != "" {
		def.podNetwork = mnv1.DefaultPodNetwork
	}
	return append([]attachment{def}, atts...), nil
}

func (d *Delegator) defaultAttachment(c *call) (attachment, error) {
	if c.conf.DefaultNetwork == "" {
		return attachment{}, fmt.Errorf("hwnet CNI config %q has no defaultNetwork: the agent writes it once the cluster-wide default network is configured", c.conf.Name)
	}
	dl, err := d.configs.loadFile(c.conf.DefaultNetwork)
	if err != nil {
		return attachment{}, fmt.Errorf("cluster-wide default network: %w", err)
	}
	return attachment{network: dl.Name, ifName: c.req.IfName, isDefault: true, delegate: dl}, nil
}

// attachAll runs the attachments' ADDs in order. Their record is saved
// before the first runs, so a crash at any point leaves on disk everything
// DEL needs; DEL of an attachment whose ADD never ran is harmless, as the
// CNI specification requires of plugins. No network collects its garbage
// meanwhile (collectNetworks).
func (d *Delegator) attachAll(ctx context.Context, c *call, rec *attachmentapi.Record, atts []attachment) ([]attached, error) {
	d.attaching.RLock()
	defer d.attaching.RUnlock()
	done := make([]attached, 0, len(atts))
	lists := make([]*netconf.Delegate, 0, len(atts))
	for _, a := range atts {
		entry, list, err := d.prepareEntry(ctx, c, a)
		if err != nil {
			return nil, err // no ADD ran: nothing to roll back
		}
		rec.Attachments = append(rec.Attachments, entry)
		lists = append(lists, list)
		done = append(done, attached{attachment: a, infoFile: entry.DeviceInfoFile})
	}
	if err := c.store.Save(rec); err != nil {
		return nil, err
	}
	infos := d.writeDeviceInfos(done)
	defer infos.wait()
	for i := range done {
		var err error
		if done[i].info, err = infos.get(i); err != nil {
			return done[:i], err
		}
		if err := d.attach(ctx, c, rec, i, &done[i], lists[i]); err != nil {
			return done[:i+1], err
		}
	}
	// The results, which DEL and CHECK pass on as prevResult; a crash
	// before this leaves DELs without one, which delegates must accept.
	if err := c.store.AppendResults(rec); err != nil {
		return done, err
	}
	return done, nil
}

// attach runs one attachment's ADD and keeps its result in the record.
func (d *Delegator) attach(ctx context.Context, c *call, rec *attachmentapi.Record, i int, a *attached, list *netconf.Delegate) error {
	entry := &rec.Attachments[i]
	if err := d.applyVF(ctx, entry, a); err != nil {
		return err
	}
	res, data, err := c.chain.Add(ctx, list, attachments.Runtime(rec, *entry))
	if err != nil {
		return fmt.Errorf("ADD network %s interface %s: %w", a.network, a.ifName, err)
	}
	a.result, entry.Result = res, data
	return nil
}

// prepareEntry builds the record entry and the configuration list an
// attachment runs with: device, device-info file and cni-args injected,
// runtimeConfig chosen.
func (d *Delegator) prepareEntry(ctx context.Context, c *call, a attachment) (attachmentapi.Attachment, *netconf.Delegate, error) {
	entry := attachmentapi.Attachment{Network: a.network, IfName: a.ifName, Default: a.isDefault,
		Args: c.pod.pairs, DeviceID: a.deviceID, Resource: a.resource, PodNetwork: a.podNetwork}
	if a.claimDevice != nil {
		entry.Claim = a.claimDevice.Claim.UID
	}
	if a.sel.HasDefaultRoute {
		entry.DefaultRoute = &attachmentapi.DefaultRoute{Gateways: a.sel.DefaultRoute}
	}
	inj := netconf.Injection{DeviceID: a.deviceID, KernelPath: d.auxiliaryPath(a.deviceID), CNIArgs: a.sel.CNIArgs}
	if a.deviceID != "" {
		entry.DeviceInfoFile = filepath.Join(d.opts.CNIDevinfoDir, devinfo.CNIFileName(a.network, c.req.ContainerID, a.ifName))
		inj.DeviceInfoFile = entry.DeviceInfoFile
	}
	dl, err := a.delegate.Inject(inj)
	if err != nil {
		return entry, nil, fmt.Errorf("network %s: %w", a.network, err)
	}
	if entry.VF, err = d.vfRecord(ctx, a); err != nil {
		return entry, nil, podFailure("InvalidVFSettings", err)
	}
	if entry.ConfList, err = dl.Bytes(); err != nil {
		return entry, nil, fmt.Errorf("network %s: %w", a.network, err)
	}
	if entry.CapabilityArgs, err = d.runtimeConfig(c, a); err != nil {
		return entry, nil, err
	}
	return entry, dl, nil
}

// runtimeConfig is what the runtime asked of hwnet for the default network
// only (NPWG 7.5), and what the selection asked for the others.
func (d *Delegator) runtimeConfig(c *call, a attachment) (map[string]json.RawMessage, error) {
	if a.isDefault {
		return c.conf.RuntimeConfig, nil
	}
	return attachments.EncodeCapabilityArgs(a.capabilityArgs())
}

// deviceInfoWrites writes the device-info files of an ADD's attachments
// in the background, once their record names them, so that the writes
// overlap the default network's ADD instead of preceding it. A delegate
// runs only once the writes are done.
type deviceInfoWrites struct {
	done chan struct{}
	// atts is a copy: attach writes to the caller's meanwhile.
	atts  []attached
	infos []*devinfo.DeviceInfo
	errs  []error
}

// writeDeviceInfos starts the writes of the device-info files of atts.
func (d *Delegator) writeDeviceInfos(atts []attached) *deviceInfoWrites {
	w := &deviceInfoWrites{done: make(chan struct{}), atts: slices.Clone(atts),
		infos: make([]*devinfo.DeviceInfo, len(atts)), errs: make([]error, len(atts))}
	go func() {
		defer close(w.done)
		for i, a := range w.atts {
			if a.infoFile != "" {
				w.infos[i], w.errs[i] = d.writeDeviceInfo(a.infoFile, a.attachment)
			}
		}
	}()
	return w
}

// get returns the device-info written for attachment i once every write
// is done; at once nil for an attachment without a device.
func (w *deviceInfoWrites) get(i int) (*devinfo.DeviceInfo, error) {
	if w.atts[i].infoFile == "" {
		return nil, nil
	}
	<-w.done
	return w.infos[i], w.errs[i]
}

// wait returns once every write is done: none may outlive its ADD, whose
// rollback removes the files.
func (w *deviceInfoWrites) wait() { <-w.done }

// auxiliaryPath is the /sys/devices path of the auxiliary device id
// names (a scalable function, which kubelet knows by its auxiliary device
// name), as host-device's kernelpath takes it; "" for any other ID.
func (d *Delegator) auxiliaryPath(id string) string {
	if id == "" || strings.ContainsAny(id, ":/") {
		return ""
	}
	root, err := filepath.EvalSymlinks(cmp.Or(d.opts.SysfsRoot, "/sys"))
	if err != nil {
		return ""
	}
	dev, err := filepath.EvalSymlinks(filepath.Join(root, "bus/auxiliary/devices", id))
	if err != nil {
		return ""
	}
	rel, err := filepath.Rel(root, dev)
	if err != nil || !strings.HasPrefix(rel, "devices/") {
		return ""
	}
	return "/sys/" + rel
}

// writeDeviceInfo copies the device plugin's device-info for the device
// into the attachment's CNI device-info file at path, as the device-info
// specification asks of a delegating plugin. A device plugin that wrote
// none (or an unreadable one) still gets its device named, so
// network-status can say which it is.
func (d *Delegator) writeDeviceInfo(path string, a attachment) (*devinfo.DeviceInfo, error) {
	info, err := devinfo.Copy(d.opts.DPDevinfoDir, a.resource, a.deviceID, path)
	if err == nil {
		return info, nil
	}
	info = devinfo.NewPCI(devinfo.PCI{PCIAddress: a.deviceID})
	if err := devinfo.WriteFile(path, info); err != nil {
		return nil, fmt.Errorf("network %s: %w", a.network, err)
	}
	return info, nil
}

// applyDefaultRoute moves the pod's default route to the attachment whose
// selection has "default-route" (NPWG 4.1.2.1.9), when one has.
func applyDefaultRoute(ctx context.Context, netnsPath string, done []attached) error {
	for _, a := range done {
		if !a.sel.HasDefaultRoute {
			continue
		}
		listed := a.defaultGateways()
		gws := make([]net.IP, len(listed))
		for i, g := range listed {
			gws[i] = net.ParseIP(g)
		}
		if err := defaultroute.Apply(ctx, netnsPath, a.ifName, gws); err != nil {
			return fmt.Errorf("network %s default-route: %w", a.network, err)
		}
	}
	return nil
}

// defaultGateways are the gateways of the default route the attachment
// holds: those its selection lists, or for a KEP-3698 isDefaultGW, which
// names a network and no gateway, the ones its result gives.
func (a attached) defaultGateways() []string {
	if len(a.sel.DefaultRoute) == 0 && a.podNetwork != "" {
		gws, _ := status.Gateways(a.result, a.ifName)
		return gws
	}
	return a.sel.DefaultRoute
}

// rollback undoes a failed ADD: DEL for the first attempted attachments,
// in reverse; the device-info files of the others, never attempted, go
// too. It returns the error to report: the cause, plus any failure of the
// undoing.
func (d *Delegator) rollback(ctx context.Context, c *call, rec *attachmentapi.Record, attempted int, cause error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	for _, a := range rec.Attachments[attempted:] {
		if a.DeviceInfoFile != "" {
			_ = devinfo.RemoveFile(a.DeviceInfoFile)
		}
	}
	tried := *rec
	tried.Attachments = rec.Attachments[:attempted]
	if err := d.deleteRecord(ctx, c, &tried); err != nil {
		return fmt.Errorf("%w; undoing the attachments made also failed (the runtime's DEL will retry): %v", cause, err)
	}
	return cause
}

// deleteRecord runs DEL for every attachment of a record, in reverse, and
// forgets the container once all succeeded.
func (d *Delegator) deleteRecord(ctx context.Context, c *call, rec *attachmentapi.Record) error {
	if err := attachments.DeleteAll(ctx, c.chain, rec, d.passedOver(rec)); err != nil {
		return err
	}
	if err := d.resetVFs(ctx, c.store, rec); err != nil {
		return err
	}
	if err := c.store.Remove(rec.ContainerID); err != nil {
		return err
	}
	d.release(ctx, rec.ContainerID)
	d.devices.forget(rec.PodUID)
	return nil
}

// passedOver logs what a teardown of rec passed over: gone, not
// installed or left out of the record.
func (d *Delegator) passedOver(rec *attachmentapi.Record) func(error) {
	return func(err error) {
		d.opts.Logger.Warn("teardown passed over what is gone or not installed", "container", rec.ContainerID, "pod", rec.PodNamespace+"/"+rec.PodName, "err", err)
	}
}

// defaultResult is the default network's result, which kubelet reads for
// the pod IP, in the version hwnet's configuration declares.
func defaultResult(res types.Result, version string) (json.RawMessage, error) {
	if res == nil {
		res = &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	}
	conv, err := res.GetAsVersion(version)
	if err != nil {
		return nil, fmt.Errorf("default network result as version %s: %w", version, err)
	}
	return json.Marshal(conv)
}

// publish queues the pod's network-status and its one Event.
func (d *Delegator) publish(c *call, done []attached) {
	if !c.pod.isPod() || d.opts.Status == nil {
		return
	}
	d.status.enqueue(c.pod.ref, done)
}

// reportFailure gives the pod an Event naming what went wrong.
func (d *Delegator) reportFailure(c *call, err error) {
	if !c.pod.isPod() || d.opts.Status == nil {
		return
	}
	reason := "NetworkSetupFailed"
	var pe *podError
	if errors.As(err, &pe) {
		reason = pe.reason
	}
	d.opts.Status.Event(c.pod.ref, "Warning", reason, err.Error())
}
