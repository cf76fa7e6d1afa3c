package dra

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/ledger"
)

// cdiClass is the class of hwnet's CDI devices: their kind is
// <driver name>/net.
const cdiClass = "net"

// PrepareResourceClaims prepares each claim's devices of this driver: a
// CDI spec per claim whose devices carry the device nodes and whose
// spec-wide edits set the PCIDEVICE_* variables of the claim's devices,
// and a device-info file per device. A claim prepared before is answered
// from the checkpoint, unchanged, unless an earlier boot of the node
// prepared it: then it is prepared anew, as kubelet expects of a driver
// it asks again after a restart. A claim's devices are reserved in the
// device ledger before anything is written: a device it refuses (another
// claim or a device plugin pod holds it, a fence withdraws it, who holds
// it is unknown, it is unhealthy) fails the claim, naming the device and
// why. Each claim is measured (Options.Metrics), with its own result or,
// when the call fails, the call's error.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	clock := startClaimClock()
	out, err := d.prepareClaims(ctx, claims, clock)
	clock.stop()
	for _, c := range claims {
		cerr := err
		if cerr == nil {
			cerr = out[c.UID].Err
		}
		d.opts.Metrics.ObserveDRAPrepare(clock.took(c.UID), cerr)
	}
	return out, err
}

// prepareClaims prepares the claims, timing each one's work on clock.
func (d *Driver) prepareClaims(ctx context.Context, claims []*resourceapi.ResourceClaim, clock *claimClock) (map[types.UID]kubeletplugin.PrepareResult, error) {
	cp, err := d.store.take()
	if err != nil {
		return nil, err
	}
	cur := d.current.Load()
	out := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	var reserved []ledger.Holder
	for _, c := range claims {
		clock.switchTo(c.UID)
		pc, ok := cp.Claims[c.UID]
		if ok && pc.Unfinished {
			// Left by a prepare that did not end (its agent died while
			// rebinding): undone at the driver's start, or here.
			if err := d.dropUnfinished(ctx, cp, c.UID); err != nil {
				out[c.UID] = kubeletplugin.PrepareResult{Err: err}
				continue
			}
			ok = false
		}
		if ok && d.earlierBoot(pc) {
			// Its CDI spec and files went with the node's restart.
			ok = false
		}
		if ok {
			// Prepared before: its VF settings and pods may change.
			pc = claimCopy(pc)
			cp.Claims[c.UID] = pc
		} else {
			if pc, err = d.prepareClaim(ctx, cp, cur, c); err != nil {
				d.log.Warn("claim not prepared", "claim", c.Namespace+"/"+c.Name, "err", err)
				out[c.UID] = kubeletplugin.PrepareResult{Err: err}
				continue
			}
			cp.Claims[c.UID] = pc
			reserved = append(reserved, claimHolder(c))
		}
		if err := d.applyVFs(ctx, cp, pc); err != nil {
			out[c.UID] = kubeletplugin.PrepareResult{Err: d.undoPrepare(ctx, cp, c.UID, err)}
			continue
		}
		addPods(pc, reservedPods(c))
		out[c.UID] = prepareResult(pc)
		d.log.Info("claim prepared", "claim", c.Namespace+"/"+c.Name, "devices", addresses(pc))
	}
	clock.switchTo("")
	if err := d.store.saveAndKeep(cp); err != nil {
		// No claim of this call is recorded: kubelet retries, or
		// unprepares by UID, which finds none to give back.
		for _, h := range reserved {
			d.opts.Ledger.Release(ctx, h)
		}
		return nil, err
	}
	d.changed()
	return out, nil
}

// changed tells Options.Changed the checkpoint may have changed.
func (d *Driver) changed() {
	if d.opts.Changed != nil {
		d.opts.Changed()
	}
}

// claimHolder is the claim as the device ledger knows it.
func claimHolder(c *resourceapi.ResourceClaim) ledger.Holder {
	return ledger.Holder{Kind: ledger.Claim, Namespace: c.Namespace, Name: c.Name, UID: string(c.UID), PodUIDs: reservedPods(c)}
}

// claimDevice is one allocated device of a claim with what it hands out.
type claimDevice struct {
	result  resourceapi.DeviceRequestAllocationResult
	entry   entry
	handout *handout.Device
}

// prepareClaim reserves a claim's devices, binds the VFs whose
// configuration asks for another driver, then writes their device-info
// files and the claim's CDI spec; a failure after the reservation puts
// the VFs back and gives the devices back.
func (d *Driver) prepareClaim(ctx context.Context, cp *checkpoint.Checkpoint, cur *published, c *resourceapi.ResourceClaim) (*checkpoint.Claim, error) {
	devs, err := d.claimDevices(cur, c)
	if err != nil {
		return nil, err
	}
	configs, err := d.deviceNetworks(c, devs)
	if err != nil {
		return nil, err
	}
	rebinds, err := d.rebinds(c, devs, configs)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(devs))
	for i, cd := range devs {
		ids[i] = cd.handout.ID
	}
	if err := d.opts.Ledger.Reserve(ctx, ledger.Request{Devices: ids, Holder: claimHolder(c)}); err != nil {
		return nil, err
	}
	if err := d.rebindClaim(ctx, cp, c, devs, rebinds); err != nil {
		d.opts.Ledger.Release(ctx, claimHolder(c))
		return nil, err
	}
	pc, err := d.writeClaim(ctx, c, devs, configs, rebinds)
	if err != nil {
		err = d.unbindClaim(ctx, cp, c, err)
		d.opts.Ledger.Release(ctx, claimHolder(c))
		return nil, err
	}
	return pc, nil
}

// writeClaim writes the claim's device-info files and CDI spec.
func (d *Driver) writeClaim(ctx context.Context, c *resourceapi.ResourceClaim, devs []claimDevice, configs []deviceConfig, rebinds []*checkpoint.Rebind) (*checkpoint.Claim, error) {
	var err error
	vfs := make([]*vfsettings.Record, len(devs))
	for i, cd := range devs {
		if vfs[i], err = d.vfRecord(ctx, cd, configs[i].vf); err != nil {
			return nil, err
		}
	}
	pc := &checkpoint.Claim{Namespace: c.Namespace, Name: c.Name, Prepared: time.Now().UTC().Truncate(time.Second),
		CDISpec: d.specPath(c.UID), BootID: d.bootID}
	spec := &cdispec.Spec{Version: handout.CDIVersion, Kind: d.opts.DriverName + "/" + cdiClass}
	for i, cd := range devs {
		h := cd.handout
		if err := devinfo.Write(d.opts.DevinfoDir, cd.entry.res.FullName(), h.ID, h.Info); err != nil {
			return nil, fmt.Errorf("device %s: %w", h.ID, err)
		}
		name := string(c.UID) + "-" + cd.result.Device
		spec.Devices = append(spec.Devices, cdispec.Device{Name: name, ContainerEdits: handout.CDIEdits(cd.result.Device, h)})
		pc.Devices = append(pc.Devices, checkpoint.Device{Request: cd.result.Request, Pool: cd.result.Pool,
			Device: cd.result.Device, Resource: cd.entry.res.FullName(), PCIAddress: h.ID, CDIDevice: spec.Kind + "=" + name, Network: configs[i].network, VF: vfs[i],
			Rebind: rebinds[i]})
	}
	if spec.ContainerEdits.Env, err = claimEnv(devs); err != nil {
		return nil, err
	}
	if err := handout.WriteCDISpec(pc.CDISpec, spec); err != nil {
		return nil, err
	}
	return pc, nil
}

// claimDevices are the claim's devices of this driver, each one this
// node publishes.
func (d *Driver) claimDevices(cur *published, c *resourceapi.ResourceClaim) ([]claimDevice, error) {
	if c.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	var devs []claimDevice
	for _, r := range c.Status.Allocation.Devices.Results {
		if r.Driver != d.opts.DriverName {
			continue
		}
		if r.AdminAccess != nil && *r.AdminAccess {
			return nil, fmt.Errorf("request %q: device %s: adminAccess is not supported by %s: a network device has one holder, and handing it to an admin pod as well would take it from that pod", r.Request, r.Device, d.opts.DriverName)
		}
		e, ok := cur.devices[r.Device]
		if !ok || r.Pool != d.opts.NodeName {
			return nil, fmt.Errorf("request %q: device %s of pool %s is not one this node publishes", r.Request, r.Device, r.Pool)
		}
		devs = append(devs, claimDevice{result: r, entry: e, handout: handout.NewMaker(e.res, d.opts.DevRoot).Make(&e.dev.Device)})
	}
	return devs, nil
}

// claimEnv sets, per pool, the variables a device plugin container with
// the same devices would get.
func claimEnv(devs []claimDevice) ([]string, error) {
	var env []string
	byPool := map[string][]*handout.Device{}
	var order []claimDevice
	for _, cd := range devs {
		name := cd.entry.res.FullName()
		if _, ok := byPool[name]; !ok {
			order = append(order, cd)
		}
		byPool[name] = append(byPool[name], cd.handout)
	}
	for _, cd := range order {
		vars, err := handout.EnvVars(cd.entry.res, byPool[cd.entry.res.FullName()])
		if err != nil {
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(vars)) {
			env = append(env, k+"="+vars[k])
		}
	}
	return env, nil
}

// addPods adds pods the claim is reserved for: a shared claim prepared
// before may serve a new pod.
func addPods(pc *checkpoint.Claim, uids []string) {
	for _, u := range uids {
		if !slices.Contains(pc.Pods, u) {
			pc.Pods = append(pc.Pods, u)
		}
	}
}

// prepareResult is what kubelet is told of a prepared claim.
func prepareResult(pc *checkpoint.Claim) kubeletplugin.PrepareResult {
	var r kubeletplugin.PrepareResult
	for _, d := range pc.Devices {
		r.Devices = append(r.Devices, kubeletplugin.Device{Requests: []string{d.Request}, PoolName: d.Pool,
			DeviceName: d.Device, CDIDeviceIDs: []string{d.CDIDevice}})
	}
	return r
}

func addresses(pc *checkpoint.Claim) string {
	ids := make([]string, len(pc.Devices))
	for i, d := range pc.Devices {
		ids[i] = d.PCIAddress
	}
	return strings.Join(ids, ",")
}

// specPath is the claim's CDI spec file, named by its UID.
func (d *Driver) specPath(uid types.UID) string {
	return filepath.Join(d.opts.CDIDir, d.opts.DriverName+"-"+string(uid)+".json")
}

// UnprepareResourceClaims removes what prepare made for each claim, from
// the checkpoint, and gives its devices back to the device ledger once the
// checkpoint no longer holds it. A claim it does not hold was never
// prepared here, is already unprepared, or was being prepared when the
// agent died, after its CDI spec was written and before the checkpoint was
// saved: its spec is removed by its UID's name, and that is no error.
// Each claim is measured (Options.Metrics), with its own result or, when
// the call fails, the call's error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	clock := startClaimClock()
	out, err := d.unprepareClaims(ctx, claims, clock)
	clock.stop()
	for _, c := range claims {
		cerr := err
		if cerr == nil {
			cerr = out[c.UID]
		}
		d.opts.Metrics.ObserveDRAUnprepare(clock.took(c.UID), cerr)
	}
	return out, err
}

// unprepareClaims unprepares the claims, timing each one's work on clock.
func (d *Driver) unprepareClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject, clock *claimClock) (map[types.UID]error, error) {
	cp, err := d.store.take()
	if err != nil {
		return nil, err
	}
	out := make(map[types.UID]error, len(claims))
	var released []ledger.Holder
	for _, c := range claims {
		clock.switchTo(c.UID)
		h := ledger.Holder{Kind: ledger.Claim, Namespace: c.Namespace, Name: c.Name, UID: string(c.UID)}
		pc, ok := cp.Claims[c.UID]
		if !ok {
			out[c.UID] = removeSpec(d.specPath(c.UID))
			released = append(released, h)
			continue
		}
		if out[c.UID] = d.unprepareClaim(ctx, pc); out[c.UID] == nil {
			delete(cp.Claims, c.UID)
			released = append(released, h)
			d.log.Info("claim unprepared", "claim", c.String(), "devices", addresses(pc))
		}
	}
	clock.switchTo("")
	if err := d.store.saveAndKeep(cp); err != nil {
		return nil, err
	}
	for _, h := range released {
		d.opts.Ledger.Release(ctx, h)
	}
	d.changed()
	return out, nil
}

// unprepareClaim resets the claim's VFs, puts the ones it rebound back on
// their drivers and removes its device-info files and CDI spec.
func (d *Driver) unprepareClaim(ctx context.Context, pc *checkpoint.Claim) error {
	var errs []error
	if err := d.resetVFs(ctx, pc); err != nil {
		errs = append(errs, err)
	}
	if err := d.restoreDrivers(ctx, pc); err != nil {
		errs = append(errs, err)
	}
	for _, dev := range pc.Devices {
		if err := devinfo.Remove(d.opts.DevinfoDir, dev.Resource, dev.PCIAddress); err != nil {
			errs = append(errs, err)
		}
	}
	if err := removeSpec(pc.CDISpec); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// undoPrepare takes back a claim whose VF settings failed: what was set
// is reset, its files removed, and it leaves the checkpoint and the
// device ledger unless that fails too, when unprepare will try again.
func (d *Driver) undoPrepare(ctx context.Context, cp *checkpoint.Checkpoint, uid types.UID, cause error) error {
	pc := cp.Claims[uid]
	d.log.Warn("claim not prepared", "claim", pc.Namespace+"/"+pc.Name, "err", cause)
	if err := d.unprepareClaim(ctx, pc); err != nil {
		return fmt.Errorf("%w; undoing it: %w", cause, err)
	}
	delete(cp.Claims, uid)
	d.opts.Ledger.Release(ctx, ledger.Holder{Kind: ledger.Claim, Namespace: pc.Namespace, Name: pc.Name, UID: string(uid)})
	return cause
}

// removeSpec removes a CDI spec; one already gone is no error.
func removeSpec(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("CDI spec: %w", err)
	}
	return nil
}
