package dra_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	drcel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// rebindPools has one pool whose claims may ask for vfio-pci on VFs that
// rest on iavf (or the other way round), one that forbids rebinding, and
// one whose extra driver the node has not loaded or its VFs cannot take.
const rebindPools = `
resourceList:
  - {resourceName: both, mode: dra, claimDrivers: [vfio-pci], selectors: {pfNames: ["enp59s0f0#0-3"], drivers: [iavf, vfio-pci]}}
  - {resourceName: fixed, mode: dra, selectors: {pfNames: ["enp59s0f0#4-5"]}}
  - {resourceName: odd, mode: dra, claimDrivers: [igb_uio, mlx5_core], selectors: {pfNames: ["enp59s0f0#6-7"]}}
`

// rebindNode is the default virtual node with its kernel emulation, the
// pools of rebindPools published to a driver kubelet does not know.
type rebindNode struct {
	*testNode
	p   *preparer
	sys pcidriver.Sysfs
}

func newRebindNode(t *testing.T) *rebindNode {
	t.Helper()
	n := newTestNodeWith(t, rebindPools)
	vnodetest.EnactWrites(t, n.node)
	p := newPreparer(t, n, t.TempDir())
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	return &rebindNode{testNode: n, p: p, sys: pcidriver.Sysfs{Root: n.node.SysRoot(), Settle: pcidriver.DefaultSettle}}
}

// binding is the VF's driver and driver_override now.
func (n *rebindNode) binding(t *testing.T, addr string) pcidriver.Binding {
	t.Helper()
	b, err := n.sys.Read(addr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// driverClaim is a claim of device whose class configuration asks for
// driver, with the VF settings vf ("" for none).
func driverClaim(uid, device, driver, vf string) *resourceapi.ResourceClaim {
	params := `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":"` + driver + `"`
	if vf != "" {
		params += `,"vf":` + vf
	}
	return withConfig(claim(uid, alloc("vf", device)), resourceapi.AllocationConfigSourceClass, nil, params+"}")
}

// TestPrepareRebinds (issue 44): a claim asking for vfio-pci gets its VF
// bound to it at prepare, with the IOMMU group's device node in its CDI
// device and the VFIO entry in its variables; unprepare puts the VF back
// exactly (iavf, no override). A VF already on the driver asked for is
// not touched.
func TestPrepareRebinds(t *testing.T) {
	n := newRebindNode(t)
	const vf = "0000:3b:01.0"
	f, _ := n.node.Device(vf)
	group := "/dev/vfio/" + strconv.Itoa(f.IOMMUGroup)
	res := n.p.prepare(t, driverClaim("dpdk", "pci-0000-3b-01-0", "vfio-pci", ""))
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got := n.binding(t, vf); got != (pcidriver.Binding{Driver: "vfio-pci", Override: "vfio-pci"}) {
		t.Errorf("VF after prepare: %+v, want on vfio-pci", got)
	}
	if f, _ := n.node.Device(vf); f.Netdev != nil {
		t.Errorf("VF on vfio-pci still has netdev %s", f.Netdev.Name)
	}
	spec := n.p.spec(t, "dpdk")
	var nodes []string
	for _, node := range spec.Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, node.Path)
	}
	if want := []string{"/dev/vfio/vfio", group}; !slices.Equal(nodes, want) {
		t.Errorf("CDI device nodes %q, want %q", nodes, want)
	}
	info := `"vfio":{"dev-mount":"` + group + `","mount":"/dev/vfio/vfio"}`
	if env := strings.Join(spec.ContainerEdits.Env, "\n"); !strings.Contains(env, info) {
		t.Errorf("variables %s, want the VFIO entry %s", env, info)
	}
	// The pools match it by the driver it rests on meanwhile.
	if r, err := n.p.drv.Rebound(); err != nil || len(r) != 1 || r[vf] != (pcidriver.Binding{Driver: "iavf"}) {
		t.Errorf("Rebound after prepare: %v (%v), want %s resting on iavf", r, err, vf)
	}
	if err := n.p.unprepare(t, "dpdk"); err != nil {
		t.Fatal(err)
	}
	if got := n.binding(t, vf); got != (pcidriver.Binding{Driver: "iavf"}) {
		t.Errorf("VF after unprepare: %+v, want back on iavf with no override", got)
	}
	if r, err := n.p.drv.Rebound(); err != nil || len(r) != 0 {
		t.Errorf("Rebound after unprepare: %v (%v), want none", r, err)
	}
	// Asked for what it has: nothing changes, nothing to put back.
	if res := n.p.prepare(t, driverClaim("kernel", "pci-0000-3b-01-0", "iavf", "")); res.Err != nil {
		t.Fatal(res.Err)
	}
	if cp := n.checkpoint(t); cp.Claims["kernel"].Devices[0].Rebind != nil {
		t.Errorf("a VF on the driver asked for recorded a rebind: %+v", cp.Claims["kernel"].Devices[0].Rebind)
	}
}

// TestClaimDriversSelectable (issue 44): a pool's VFs say which drivers a
// claim may ask for, and the selector docs/dra.md gives picks exactly
// them, as the scheduler's CEL evaluates it.
func TestClaimDriversSelectable(t *testing.T) {
	n := newRebindNode(t)
	devs, err := dra.Devices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools)
	if err != nil {
		t.Fatal(err)
	}
	const expr = `"claimDrivers" in device.attributes["hwnet.io"] && ("," + device.attributes["hwnet.io"].claimDrivers + ",").contains(",vfio-pci,")`
	sel := drcel.GetCompiler(drcel.Features{}).CompileCELExpression(expr, drcel.Options{})
	if sel.Error != nil {
		t.Fatal(sel.Error)
	}
	var got []string
	for _, d := range devs {
		ok, _, err := sel.DeviceMatches(context.Background(), drcel.Device{Driver: dra.DefaultDriverName, Attributes: d.Attributes})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			got = append(got, d.Name)
		}
	}
	want := []string{"pci-0000-3b-01-0", "pci-0000-3b-01-1", "pci-0000-3b-01-2", "pci-0000-3b-01-3"}
	if !slices.Equal(got, want) {
		t.Errorf("devices a vfio-pci claim selects: %q, want %q", got, want)
	}
}

// TestPrepareRebindRefused (issue 44): a driver the pool does not allow,
// one the node has not loaded, one the VF cannot take, and vfio-pci with
// settings that need the netdev fail the claim naming the claim, the key
// and the value; the VF is on its driver as before, nothing is recorded
// or written, and its reservation is given back.
func TestPrepareRebindRefused(t *testing.T) {
	n := newRebindNode(t)
	tests := []struct {
		name, device, addr, driver, vf, want string
	}{
		{"pool forbids rebinding", "pci-0000-3b-01-4", "0000:3b:01.4", "vfio-pci", "",
			`ResourceClaim ns/claim-c: device 0000:3b:01.4: "driver" "vfio-pci": pool intel.com/fixed rebinds no VF (its claimDrivers are empty); its VF is on iavf`},
		{"not among the pool's", "pci-0000-3b-01-1", "0000:3b:01.1", "igb_uio", "",
			`ResourceClaim ns/claim-c: device 0000:3b:01.1: "driver" "igb_uio": pool intel.com/both allows claims only vfio-pci (claimDrivers)`},
		{"not loaded", "pci-0000-3b-01-7", "0000:3b:01.7", "igb_uio", "",
			`ResourceClaim ns/claim-c: device 0000:3b:01.7: "driver" "igb_uio": the node has no such driver loaded`},
		{"the VF cannot take it", "pci-0000-3b-01-7", "0000:3b:01.7", "mlx5_core", "",
			`ResourceClaim ns/claim-c: device 0000:3b:01.7: "driver" "mlx5_core": binding it: bound to mlx5_core: not so after 10s`},
		{"settings need the netdev", "pci-0000-3b-01-2", "0000:3b:01.2", "vfio-pci", `{"mtu":9000}`,
			`ResourceClaim ns/claim-c: device 0000:3b:01.2: "driver" "vfio-pci": "vf" "mtu" and "macAddress" need the VF's netdev, which vfio-pci takes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := n.binding(t, tt.addr)
			res := n.p.prepare(t, driverClaim("c", tt.device, tt.driver, tt.vf))
			if res.Err == nil || !strings.Contains(res.Err.Error(), tt.want) {
				t.Fatalf("err %v, want %q", res.Err, tt.want)
			}
			if got := n.binding(t, tt.addr); got != before {
				t.Errorf("VF %+v after the refusal, it was %+v", got, before)
			}
			if cp := n.checkpoint(t); len(cp.Claims) != 0 {
				t.Errorf("checkpoint holds %d claims after the refusal", len(cp.Claims))
			}
			if specs, _ := os.ReadDir(n.p.opts.CDIDir); len(specs) != 0 {
				t.Errorf("CDI specs left: %v", specs)
			}
			// Given back: another claim gets the device.
			if res := n.p.prepare(t, claim("next", alloc("vf", tt.device))); res.Err != nil {
				t.Fatalf("the device after the refusal: %v", res.Err)
			}
			if err := n.p.unprepare(t, "next"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAgentKilledWhileRebinding (issue 44): an agent killed between a
// VF's unbind and its bind leaves the claim recorded unfinished and the
// VF unbound. The next start puts the VF back on its driver and drops the
// record before kubelet can call; kubelet's retried prepare then binds it
// again and succeeds. The same record met by a prepare is undone first.
func TestAgentKilledWhileRebinding(t *testing.T) {
	for _, at := range []string{"start", "prepare"} {
		t.Run(at, func(t *testing.T) {
			n := newRebindNode(t)
			const vf = "0000:3b:01.3"
			n.killedWhileRebinding(t, "k", vf)
			if at == "start" {
				if err := n.p.drv.RecoverUnfinished(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got := n.binding(t, vf); got != (pcidriver.Binding{Driver: "iavf"}) {
					t.Errorf("VF after the start: %+v, want back on iavf", got)
				}
				if cp := n.checkpoint(t); len(cp.Claims) != 0 {
					t.Errorf("checkpoint after the start: %+v, want the unfinished claim dropped", cp.Claims)
				}
			}
			if res := n.p.prepare(t, driverClaim("k", "pci-0000-3b-01-3", "vfio-pci", "")); res.Err != nil {
				t.Fatal(res.Err)
			}
			if got := n.binding(t, vf); got.Driver != "vfio-pci" {
				t.Errorf("VF after the retried prepare: %+v, want on vfio-pci", got)
			}
			if err := n.p.unprepare(t, "k"); err != nil {
				t.Fatal(err)
			}
			if got := n.binding(t, vf); got != (pcidriver.Binding{Driver: "iavf"}) {
				t.Errorf("VF after unprepare: %+v, want back on iavf", got)
			}
			if files, _ := devinfo.List(n.p.opts.DevinfoDir); len(files) != 0 {
				t.Errorf("device-info files left: %v", files)
			}
		})
	}
}

// killedWhileRebinding leaves what an agent killed between the unbind and
// the bind of addr for claim uid leaves: the record, and the VF unbound
// with the override written.
func (n *rebindNode) killedWhileRebinding(t *testing.T, uid, addr string) {
	t.Helper()
	cp := checkpoint.New()
	cp.Claims[k8stypes.UID(uid)] = &checkpoint.Claim{Namespace: "ns", Name: "claim-" + uid, Unfinished: true,
		CDISpec: filepath.Join(n.p.opts.CDIDir, dra.DefaultDriverName+"-"+uid+".json"),
		Devices: []checkpoint.Device{{Request: "vf", Pool: nodeName, Device: dra.DeviceName(addr), Resource: "intel.com/both", PCIAddress: addr,
			Rebind: &checkpoint.Rebind{Driver: "vfio-pci", WasDriver: "iavf"}}}}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.p.opts.PluginDir, "checkpoint.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.sys.Unbind(ctx, addr, "iavf"); err != nil {
		t.Fatal(err)
	}
	if err := n.sys.WriteOverride(addr, "vfio-pci"); err != nil {
		t.Fatal(err)
	}
}

// checkpoint is the driver's checkpoint on disk.
func (n *rebindNode) checkpoint(t *testing.T) *checkpoint.Checkpoint {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(n.p.opts.PluginDir, "checkpoint.json"))
	if os.IsNotExist(err) {
		return checkpoint.New()
	}
	if err != nil {
		t.Fatal(err)
	}
	cp, err := checkpoint.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}
