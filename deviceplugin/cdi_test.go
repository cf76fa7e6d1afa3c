package deviceplugin

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
)

var cdiPool = pools.Resource{Prefix: "intel.com", Name: "dpdk", CDI: true}

// newCDIPlugin is a plugin of cdiPool writing its spec into dir.
func newCDIPlugin(t *testing.T, n *testNode, dir string) *Plugin {
	t.Helper()
	return New(cdiPool, Options{CDIDir: dir, DevinfoDir: t.TempDir(), DevRoot: n.node.DevRoot(), Ledger: openLedger(t)})
}

// readCDISpec reads the pool's spec, its devices' edits by name.
func readCDISpec(t *testing.T, path string) (string, map[string]cdispec.ContainerEdits) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	edits := map[string]cdispec.ContainerEdits{}
	for _, d := range spec.Devices {
		edits[d.Name] = d.ContainerEdits
	}
	return spec.Kind, edits
}

func nodePaths(e cdispec.ContainerEdits) []string {
	var out []string
	for _, n := range e.DeviceNodes {
		out = append(out, n.HostPath+">"+n.Path+":"+n.Permissions)
	}
	return out
}

// TestAllocateThroughCDI (issue 44): a pool with cdi writes a CDI spec of
// its devices, named by PCI address under the resource's name, with each
// device's nodes, and Allocate answers with the container's CDI devices
// instead of device nodes; the SR-IOV device plugin's variables stay.
func TestAllocateThroughCDI(t *testing.T) {
	n := newTestNode(t)
	dir := filepath.Join(t.TempDir(), "cdi")
	p := newCDIPlugin(t, n, dir)
	p.SetDevices(n.devices(t, pf0))
	path := filepath.Join(dir, "hwnet-dp-intel.com_dpdk.json")
	kind, edits := readCDISpec(t, path)
	if kind != "intel.com/dpdk" {
		t.Errorf("kind %q, want intel.com/dpdk", kind)
	}
	if len(edits) != 8 {
		t.Errorf("spec has %d devices, want pf0's 8 VFs", len(edits))
	}
	if got, want := nodePaths(edits[vfioVF]), []string{"/dev/vfio/vfio>/dev/vfio/vfio:rw", "/dev/vfio/8>/dev/vfio/8:rw"}; !slices.Equal(got, want) {
		t.Errorf("%s's device nodes %v, want %v", vfioVF, got, want)
	}
	if e := edits[netVF]; len(e.DeviceNodes) != 0 || !slices.Equal(e.Env, []string{"HWNET_DEVICE_0000_3B_01_0=" + netVF}) {
		t.Errorf("%s's edits %+v, want its variable alone: a netdev VF has no device node", netVF, e)
	}
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vfioVF1, vfioVF}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.ContainerResponses[0]
	var names []string
	for _, d := range c.CdiDevices {
		names = append(names, d.Name)
	}
	if want := []string{"intel.com/dpdk=" + vfioVF, "intel.com/dpdk=" + vfioVF1}; !slices.Equal(names, want) {
		t.Errorf("CDI devices %v, want %v", names, want)
	}
	if len(c.Devices) != 0 {
		t.Errorf("device nodes %v beside the CDI devices, want none: the spec has them", c.Devices)
	}
	if got := c.Envs["PCIDEVICE_INTEL_COM_DPDK"]; got != vfioVF+","+vfioVF1 {
		t.Errorf("PCIDEVICE_INTEL_COM_DPDK=%q, want both VFs", got)
	}
}

// TestCDISpecFollowsDevices: the spec is rewritten when the pool's devices
// or what they hand out change, and only then.
func TestCDISpecFollowsDevices(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	p := newCDIPlugin(t, n, dir)
	all := n.devices(t, pf0)
	p.SetDevices(all)
	path := filepath.Join(dir, CDISpecName(cdiPool.FullName()))
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	unhealthy := slices.Clone(all)
	unhealthy[0].Healthy, unhealthy[0].Reason = false, "link down"
	p.SetDevices(unhealthy)
	if after, _ := os.Stat(path); !os.SameFile(before, after) {
		t.Error("a health change rewrote the spec: nothing it holds changed")
	}
	rebound := slices.Clone(all[:2])
	rebound[0] = edited(rebound[0], func(fn *discovery.Function) {
		fn.Driver, fn.VFIODevice = "vfio-pci", filepath.Join(n.node.DevRoot(), "vfio", "42")
	})
	p.SetDevices(rebound)
	_, edits := readCDISpec(t, path)
	if len(edits) != 2 {
		t.Errorf("spec has %d devices after the pool shrank to 2", len(edits))
	}
	if got := nodePaths(edits[rebound[0].ID]); !slices.Contains(got, "/dev/vfio/42>/dev/vfio/42:rw") {
		t.Errorf("%s rebound to vfio-pci: device nodes %v, want /dev/vfio/42", rebound[0].ID, got)
	}
}

// TestCDISpecUnwritable: a device whose spec entry could not be written is
// listed unhealthy, saying why, and an Allocate of it is refused before
// the ledger reserves anything: the runtime could not resolve it.
func TestCDISpecUnwritable(t *testing.T) {
	n := newTestNode(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	book := openLedger(t)
	p := New(cdiPool, Options{CDIDir: filepath.Join(file, "cdi"), DevinfoDir: t.TempDir(), DevRoot: n.node.DevRoot(), Ledger: book})
	p.SetDevices(n.devices(t, pf0))
	for _, d := range p.current.Load().devices {
		if d.Offered() || !strings.Contains(d.Reason, "CDI spec") {
			t.Errorf("%s listed %+v, want unhealthy for its CDI spec", d.ID, d)
		}
	}
	_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vfioVF}}},
	})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), vfioVF) {
		t.Fatalf("Allocate error = %v, want FailedPrecondition naming %s", err, vfioVF)
	}
	if held := book.Snapshot().Holders(vfioVF); len(held) != 0 {
		t.Errorf("%s held by %v after a refused Allocate", vfioVF, held)
	}
}

// TestNoCDISpecWithoutCDI: a pool without cdi writes no spec and hands
// out device nodes.
func TestNoCDISpecWithoutCDI(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	res := cdiPool
	res.CDI = false
	p := New(res, Options{CDIDir: dir, DevinfoDir: t.TempDir(), DevRoot: n.node.DevRoot(), Ledger: openLedger(t)})
	p.SetDevices(n.devices(t, pf0))
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("CDI directory holds %v", entries)
	}
	resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{vfioVF}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.ContainerResponses[0]; len(c.CdiDevices) != 0 || len(c.Devices) == 0 {
		t.Errorf("response %+v, want device nodes and no CDI device", c)
	}
}

// TestStaleCDISpecs: a spec no pool writes is listed once it was written
// before since, with a device it names that is held; one written since is
// not listed but said young, so that the collector has the ledger read
// afresh; a spec a pool writes is neither.
func TestStaleCDISpecs(t *testing.T) {
	dir := t.TempDir()
	const gone, served = "hwnet-dp-example.com_gone.json", "hwnet-dp-example.com_served.json"
	for _, name := range []string{gone, served} {
		spec := `{"cdiVersion":"0.5.0","kind":"example.com/x","devices":[{"name":"0000:3b:01.7","containerEdits":{"env":["A=1"]}}]}`
		if err := os.WriteFile(filepath.Join(dir, name), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale := func(path string) bool { return filepath.Base(path) == gone }
	held := func(id string) bool { return id == "0000:3b:01.7" }
	for _, tc := range []struct {
		name      string
		since     time.Time
		want      []StaleCDISpec
		wantYoung bool
	}{
		{"written before since", time.Now().Add(time.Hour), []StaleCDISpec{{Path: filepath.Join(dir, gone), HeldDevice: "0000:3b:01.7"}}, false},
		{"written since", time.Now().Add(-time.Hour), nil, true},
	} {
		got, young, err := StaleCDISpecs(dir, stale, held, tc.since)
		if err != nil || !slices.Equal(got, tc.want) || young != tc.wantYoung {
			t.Errorf("%s: StaleCDISpecs = %+v, young %t, %v; want %+v, young %t", tc.name, got, young, err, tc.want, tc.wantYoung)
		}
	}
}
