package handout_test

import (
	"reflect"
	"slices"
	"testing"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/handout"
	"github.com/hwnet-io/hwnet/node/pools"
)

func TestMake(t *testing.T) {
	vfio := pools.Device{ID: "0000:3b:01.6", PF: "0000:3b:00.0", Function: &discovery.Function{
		Address: "0000:3b:01.6", Driver: "vfio-pci", VFIODevice: "/tmp/node/dev/vfio/8"}}
	ib := pools.Device{ID: "0000:41:01.0", PF: "0000:41:00.0", Function: &discovery.Function{
		Address: "0000:41:01.0", Driver: "mlx5_core", RDMA: &discovery.RDMA{Device: "mlx5_1",
			CharDevices: []string{"/dev/infiniband/uverbs1", "/dev/infiniband/umad1", "/dev/infiniband/issm1", "/dev/infiniband/rdma_cm"}}}}
	// One port of an mlx4 function: its device-info names the function's
	// PCI address, not the port's device ID.
	port := pools.Device{ID: "0000:03:00.0:p1", VFIndex: -1, Function: &discovery.Function{
		Address: "0000:03:00.0", Driver: "mlx4_core", Netdev: &discovery.Netdev{Name: "ib1", Port: 1}}}
	tests := []struct {
		name      string
		res       pools.Resource
		dev       pools.Device
		wantNodes []string
		wantInfo  *devinfo.DeviceInfo
	}{
		{"vfio under a dev root", pools.Resource{Name: "dpdk"}, vfio,
			[]string{handout.VFIOContainer, "/dev/vfio/8"},
			devinfo.NewPCI(devinfo.PCI{PCIAddress: vfio.ID, PFPCIAddress: vfio.PF})},
		{"rdma pool", pools.Resource{Name: "ib", IsRDMA: true}, ib,
			ib.Function.RDMA.CharDevices,
			devinfo.NewPCI(devinfo.PCI{PCIAddress: ib.ID, PFPCIAddress: ib.PF, RDMADevice: "mlx5_1"})},
		{"rdma device in a pool without isRdma", pools.Resource{Name: "ib"}, ib, nil,
			devinfo.NewPCI(devinfo.PCI{PCIAddress: ib.ID, PFPCIAddress: ib.PF})},
		{"vhost-net", pools.Resource{Name: "v", NeedVhostNet: true}, ib, []string{handout.VhostNet, handout.Tun},
			devinfo.NewPCI(devinfo.PCI{PCIAddress: ib.ID, PFPCIAddress: ib.PF, VhostNet: handout.VhostNet})},
		{"one port of an mlx4 function", pools.Resource{Name: "ib"}, port, nil,
			devinfo.NewPCI(devinfo.PCI{PCIAddress: "0000:03:00.0"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := handout.NewMaker(&tt.res, "/tmp/node/dev").Make(&tt.dev)
			if !reflect.DeepEqual(got.Nodes, tt.wantNodes) {
				t.Errorf("nodes %q, want %q", got.Nodes, tt.wantNodes)
			}
			if !reflect.DeepEqual(got.Info, tt.wantInfo) {
				t.Errorf("device info %+v, want %+v", got.Info, tt.wantInfo)
			}
		})
	}
}

func TestEnvVars(t *testing.T) {
	res := pools.Resource{Prefix: "intel.com", Name: "sriov_dpdk", AdditionalInfo: map[string]map[string]string{"*": {"k": "v"}}}
	m := handout.NewMaker(&res, "")
	devs := []*handout.Device{
		m.Make(&pools.Device{ID: "0000:3b:01.7", Function: &discovery.Function{Driver: "vfio-pci", VFIODevice: "/dev/vfio/9"}}),
		m.Make(&pools.Device{ID: "0000:3b:01.6", Function: &discovery.Function{Driver: "vfio-pci", VFIODevice: "/dev/vfio/8"}}),
	}
	got, err := handout.EnvVars(&res, devs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"PCIDEVICE_INTEL_COM_SRIOV_DPDK": "0000:3b:01.6,0000:3b:01.7",
		"PCIDEVICE_INTEL_COM_SRIOV_DPDK_INFO": `{"0000:3b:01.6":{"extra":{"k":"v"},"generic":{"deviceID":"0000:3b:01.6"},"vfio":{"dev-mount":"/dev/vfio/8","mount":"/dev/vfio/vfio"}},` +
			`"0000:3b:01.7":{"extra":{"k":"v"},"generic":{"deviceID":"0000:3b:01.7"},"vfio":{"dev-mount":"/dev/vfio/9","mount":"/dev/vfio/vfio"}}}`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env\n got %q\nwant %q", got, want)
	}
	if nodes := nodesOf(devs); !reflect.DeepEqual(nodes, []string{handout.VFIOContainer, "/dev/vfio/9", "/dev/vfio/8"}) {
		t.Errorf("nodes %q", nodes)
	}
}

// nodesOf is the device nodes of devs, each once, in the order first seen.
func nodesOf(devs []*handout.Device) []string {
	var nodes []string
	for _, d := range devs {
		for _, n := range d.Nodes {
			if !slices.Contains(nodes, n) {
				nodes = append(nodes, n)
			}
		}
	}
	return nodes
}
