package dra_test

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// poolsConfig fits the default virtual node: a tag on the first E810-C,
// its iavf VFs, the vfio-pci VFs of both and the InfiniBand VFs.
const poolsConfig = `
tags:
  - {name: fabric-a, selectors: {pfNames: [enp59s0f0]}}
resourceList:
  - {resourceName: sriov_fabric_a, mode: dra, selectors: {tags: [fabric-a], drivers: [iavf]}}
  - {resourceName: sriov_dpdk, mode: dra, selectors: {drivers: [vfio-pci]}}
  - {resourceName: ib, resourcePrefix: nvidia.com, mode: dra, selectors: {linkTypes: [infiniband], isRdma: true}}
`

// testNode is the default virtual node (no links) and its DRA pools.
type testNode struct {
	node  *virtualnode.Node
	inv   *discovery.Inventory
	pools []dra.Pool
}

func newTestNode(t testing.TB) *testNode {
	t.Helper()
	return newTestNodeWith(t, poolsConfig)
}

// newTestNodeWith is the default virtual node with config's DRA pools,
// every device healthy.
func newTestNodeWith(t testing.TB, config string) *testNode {
	t.Helper()
	return newTestNodeOf(t, virtualnode.DefaultSpec(), config)
}

// newTestNodeOf is spec's virtual node with config's DRA pools, every
// device healthy.
func newTestNodeOf(t testing.TB, spec *virtualnode.Spec, config string) *testNode {
	t.Helper()
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	node := vnodetest.BuildForTest(t, spec, db, false)
	inv, err := discovery.Discover(context.Background(), discovery.Options{
		SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(), DB: db, ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA{},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse([]byte(config))
	if err != nil {
		t.Fatal(err)
	}
	n := &testNode{node: node, inv: inv}
	for _, p := range cfg.Match(inv).Pools {
		dp := dra.Pool{Resource: p.Resource}
		for _, d := range p.Devices {
			dp.Devices = append(dp.Devices, offer.State{Device: d, Healthy: true})
		}
		n.pools = append(n.pools, dp)
	}
	return n
}

func (n *testNode) devices(t testing.TB) map[string]resourceapi.Device {
	t.Helper()
	devs, err := dra.Devices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]resourceapi.Device{}
	for _, d := range devs {
		byName[d.Name] = d
	}
	return byName
}

func str(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }

func num(i int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: &i} }

func flag(b bool) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{BoolValue: &b} }

// TestDevicesRepresentor: a VF of a switchdev PF names its representor,
// which an OVS or OVN CNI plugs; a VF without one has no such attribute.
func TestDevicesRepresentor(t *testing.T) {
	n := newTestNode(t)
	devs := n.pools[0].Devices
	devs[0].Representor = "pf0vf6"
	got := n.devices(t)
	for _, d := range devs {
		name := dra.DeviceName(d.ID)
		attr, ok := got[name].Attributes[dra.AttrRepresentor]
		switch {
		case d.Representor != "" && (!ok || attr.StringValue == nil || *attr.StringValue != d.Representor):
			t.Errorf("%s: representor %s, want %s", name, show(attr), d.Representor)
		case d.Representor == "" && ok:
			t.Errorf("%s: representor %s, want none", name, show(attr))
		}
	}
}

// TestDevicesSF: a scalable function is a device named after its
// auxiliary device, with its PF's PCIe root but no PCI bus ID of its own,
// its aux type, sfnum, PF and RDMA device.
func TestDevicesSF(t *testing.T) {
	spec := &virtualnode.Spec{Name: "dra-sf", PFs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", SFs: 1, Names: []string{"p0"}}}}
	n := newTestNodeOf(t, spec, `resourceList: [{resourceName: sf, resourcePrefix: nvidia.com, deviceType: auxNetDevice, mode: dra, selectors: {auxTypes: [sf]}}]`)
	if len(n.inv.PFs) != 1 || len(n.inv.PFs[0].SFs) != 1 {
		t.Fatalf("inventory %+v: want one PF with one SF", n.inv.PFs)
	}
	pf, sf := n.inv.PFs[0], n.inv.PFs[0].SFs[0]
	got := n.devices(t)
	name := dra.DeviceName(sf.Name)
	d, ok := got[name]
	if !ok || name != "aux-"+strings.NewReplacer("_", "-", ".", "-").Replace(sf.Name) {
		t.Fatalf("devices %v: want %s", slices.Collect(maps.Keys(got)), name)
	}
	want := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"resource.kubernetes.io/pcieRoot": str("pci0000:3a"), "resource.kubernetes.io/numaNode": num(0),
		"vendor": str("15b3"), "device": str("101d"), "model": str("ConnectX-6 Dx"), "pfName": str("p0"),
		"pfPCIAddress": str(pf.Address), "driver": str("mlx5_core"), "linkType": str("ethernet"),
		"rdma": flag(true), "eswitchMode": str("legacy"), "pool": str("nvidia.com/sf"), "auxType": str("sf"), "sfNum": num(88),
		"k8s.cni.cncf.io/resourceName": str("nvidia.com/sf"), "k8s.cni.cncf.io/deviceID": str(sf.Name),
	}
	if !reflect.DeepEqual(d.Attributes, want) {
		t.Errorf("%s: attributes\n%v\nwant\n%v", name, showAll(d.Attributes), showAll(want))
	}
}

// showAll writes attributes for a test's message.
func showAll(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute) string {
	var out []string
	for k, v := range attrs {
		out = append(out, string(k)+"="+show(v))
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// TestDevices: every pooled device is listed once with the standard,
// hwnet's and the NPWG's attributes.
func TestDevices(t *testing.T) {
	n := newTestNode(t)
	got := n.devices(t)
	if len(got) != 4+4+6 {
		t.Errorf("%d devices, want 14 (4 vfio-pci, 4 InfiniBand, 6 fabric-a)", len(got))
	}
	tests := []struct {
		name string
		want map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
	}{
		{"pci-0000-3e-01-7", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"resource.kubernetes.io/pciBusID": str("0000:3e:01.7"), "resource.kubernetes.io/pcieRoot": str("pci0000:3d"),
			"resource.kubernetes.io/numaNode": num(1),
			"vendor":                          str("8086"), "device": str("1889"), "model": str("E810-C"), "pfName": str("enp62s0f0"),
			"pfPCIAddress": str("0000:3e:00.0"), "vfIndex": num(7), "driver": str("vfio-pci"), "linkType": str("ethernet"),
			"rdma": flag(false), "eswitchMode": str("legacy"), "pool": str("intel.com/sriov_dpdk"),
			"k8s.cni.cncf.io/resourceName": str("intel.com/sriov_dpdk"), "k8s.cni.cncf.io/deviceID": str("0000:3e:01.7"),
		}},
		{"pci-0000-3b-01-0", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"resource.kubernetes.io/pciBusID": str("0000:3b:01.0"), "resource.kubernetes.io/pcieRoot": str("pci0000:3a"),
			"resource.kubernetes.io/numaNode": num(0),
			"vendor":                          str("8086"), "device": str("1889"), "model": str("E810-C"), "pfName": str("enp59s0f0"),
			"pfPCIAddress": str("0000:3b:00.0"), "vfIndex": num(0), "driver": str("iavf"), "linkType": str("ethernet"),
			"rdma": flag(false), "eswitchMode": str("legacy"), "tags": str("fabric-a"), "pool": str("intel.com/sriov_fabric_a"),
			"k8s.cni.cncf.io/resourceName": str("intel.com/sriov_fabric_a"), "k8s.cni.cncf.io/deviceID": str("0000:3b:01.0"),
		}},
		{"pci-0000-41-01-1", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"resource.kubernetes.io/pciBusID": str("0000:41:01.1"), "resource.kubernetes.io/pcieRoot": str("pci0000:40"),
			"resource.kubernetes.io/numaNode": num(0),
			"vendor":                          str("15b3"), "device": str("101c"), "model": str("ConnectX-6"), "pfName": str("ibp65s0f0"),
			"pfPCIAddress": str("0000:41:00.0"), "vfIndex": num(1), "driver": str("mlx5_core"), "linkType": str("infiniband"),
			"rdma": flag(true), "pKey": str("0xffff"), "eswitchMode": str("legacy"), "pool": str("nvidia.com/ib"),
			"k8s.cni.cncf.io/resourceName": str("nvidia.com/ib"), "k8s.cni.cncf.io/deviceID": str("0000:41:01.1"),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, ok := got[tt.name]
			if !ok {
				t.Fatalf("no device %s", tt.name)
			}
			for name, want := range tt.want {
				if !reflect.DeepEqual(d.Attributes[name], want) {
					t.Errorf("%s = %s, want %s", name, show(d.Attributes[name]), show(want))
				}
			}
			for name := range d.Attributes {
				if _, ok := tt.want[name]; !ok {
					t.Errorf("unexpected attribute %s = %s", name, show(d.Attributes[name]))
				}
			}
			if len(d.Taints) != 0 {
				t.Errorf("healthy device has taints %+v", d.Taints)
			}
		})
	}
}

func show(a resourceapi.DeviceAttribute) string {
	switch {
	case a.StringValue != nil:
		return *a.StringValue
	case a.IntValue != nil:
		return string(rune('0' + *a.IntValue))
	case a.BoolValue != nil:
		return map[bool]string{true: "true", false: "false"}[*a.BoolValue]
	}
	return "<none>"
}

// TestTaints: an unhealthy device is tainted NoSchedule with its reason
// as a label value, NoExecute when it evicts; a healthy one has no taint.
func TestTaints(t *testing.T) {
	tests := []struct {
		reason, want string
		evict        bool
	}{
		{reason: "PF 0000:3b:00.0 link enp59s0f0 is down", want: "PF-0000-3b-00.0-link-enp59s0f0-is-down", evict: true},
		{"PF 0000:3b:00.0 link enp59s0f0 is down", "PF-0000-3b-00.0-link-enp59s0f0-is-down", false},
		{"link enp59s0f0v1 is up but has no carrier", "link-enp59s0f0v1-is-up-but-has-no-carrier", false},
		{"", "unhealthy", false},
		{"  ::: ", "unhealthy", false},
		{"bound to vfio-pci but its VFIO group device is missing and this reason runs on", "bound-to-vfio-pci-but-its-VFIO-group-device-is-missing-and-this", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s evict=%t", tt.reason, tt.evict), func(t *testing.T) {
			p := dra.Pool{Resource: pools.Resource{Prefix: "intel.com", Name: "x"}, EvictDeadPF: tt.evict, Devices: []offer.State{
				{Device: pools.Device{ID: "0000:3b:01.0", VFIndex: -1, Function: &discovery.Function{NUMANode: -1}}, Reason: tt.reason, DeadPF: true},
			}}
			devs, err := dra.Devices(dra.Node{SysfsRoot: t.TempDir()}, []dra.Pool{p})
			if err != nil {
				t.Fatal(err)
			}
			effect := resourceapi.DeviceTaintEffectNoSchedule
			if tt.evict {
				effect = resourceapi.DeviceTaintEffectNoExecute
			}
			want := []resourceapi.DeviceTaint{{Key: dra.TaintKey, Value: tt.want, Effect: effect}}
			if !reflect.DeepEqual(devs[0].Taints, want) {
				t.Errorf("taints %+v, want %+v", devs[0].Taints, want)
			}
			if _, ok := devs[0].Attributes["resource.kubernetes.io/numaNode"]; ok {
				t.Error("numaNode published for a device without NUMA affinity")
			}
		})
	}
}

// TestDevicesInTwoPools: a device is served by one pool only.
func TestDevicesInTwoPools(t *testing.T) {
	d := offer.State{Device: pools.Device{ID: "0000:3b:01.0", Function: &discovery.Function{}}, Healthy: true}
	ps := []dra.Pool{
		{Resource: pools.Resource{Prefix: "intel.com", Name: "a"}, Devices: []offer.State{d}},
		{Resource: pools.Resource{Prefix: "intel.com", Name: "b"}, Devices: []offer.State{d}},
	}
	_, err := dra.Devices(dra.Node{}, ps)
	if err == nil || err.Error() != "device 0000:3b:01.0: in pools intel.com/a and intel.com/b" {
		t.Errorf("err %v", err)
	}
}
