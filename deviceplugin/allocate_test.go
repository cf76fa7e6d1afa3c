package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// validEnvName is what POSIX shells accept as a variable name.
var validEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func TestSocketName(t *testing.T) {
	for name, want := range map[string]string{
		"intel.com/sriov_net": "intel.com_sriov_net.sock",
		"intel.com/sriov-net": "intel.com_sriov-net.sock",
		"a.io/x y":            "a.io_x_y.sock",
	} {
		if got := SocketName(name); got != want {
			t.Errorf("SocketName(%q) = %q, want %q", name, got, want)
		}
	}
}

// spec is a device node as kubelet gets it.
type spec struct{ host, container, perms string }

func specsOf(c *pluginapi.ContainerAllocateResponse) []spec {
	var out []spec
	for _, d := range c.Devices {
		out = append(out, spec{d.HostPath, d.ContainerPath, d.Permissions})
	}
	return out
}

func rw(path string) spec { return spec{path, path, "rw"} }

func TestAllocateHandsOutDevices(t *testing.T) {
	n := newTestNode(t)
	noIOMMU := edited(n.device(t, vfioVF), func(fn *discovery.Function) {
		fn.VFIODevice = filepath.Join(n.node.DevRoot(), "vfio", "noiommu-8")
	})
	twoPorts := withSecondPort(n.device(t, ibVF), filepath.Join(n.node.DevRoot(), "infiniband"))
	sriovNet := pools.Resource{Prefix: "intel.com", Name: "sriov_net"}
	tests := []struct {
		name      string
		res       pools.Resource
		devices   []offer.State
		allocate  []string
		wantEnv   map[string]string
		wantSpecs []spec
		wantInfo  map[string]*devinfo.DeviceInfo
	}{
		{
			name:    "netdev VF",
			res:     sriovNet,
			devices: n.devices(t, pf0), allocate: []string{netVF},
			wantEnv: map[string]string{
				"PCIDEVICE_INTEL_COM_SRIOV_NET":      netVF,
				"PCIDEVICE_INTEL_COM_SRIOV_NET_INFO": `{"0000:3b:01.0":{"generic":{"deviceID":"0000:3b:01.0"}}}`,
			},
			wantInfo: map[string]*devinfo.DeviceInfo{netVF: devinfo.NewPCI(devinfo.PCI{PCIAddress: netVF, PFPCIAddress: pf0})},
		},
		{
			name:    "vfio VFs share the VFIO container",
			res:     pools.Resource{Prefix: "intel.com", Name: "dpdk"},
			devices: n.devices(t, pf0), allocate: []string{vfioVF1, vfioVF},
			wantEnv: map[string]string{
				"PCIDEVICE_INTEL_COM_DPDK": "0000:3b:01.6,0000:3b:01.7",
				"PCIDEVICE_INTEL_COM_DPDK_INFO": `{"0000:3b:01.6":{"generic":{"deviceID":"0000:3b:01.6"},` +
					`"vfio":{"dev-mount":"/dev/vfio/8","mount":"/dev/vfio/vfio"}},` +
					`"0000:3b:01.7":{"generic":{"deviceID":"0000:3b:01.7"},"vfio":{"dev-mount":"/dev/vfio/9","mount":"/dev/vfio/vfio"}}}`,
			},
			wantSpecs: []spec{rw("/dev/vfio/vfio"), rw("/dev/vfio/8"), rw("/dev/vfio/9")},
		},
		{
			name:    "vfio without an IOMMU",
			res:     pools.Resource{Prefix: "intel.com", Name: "dpdk"},
			devices: []offer.State{noIOMMU}, allocate: []string{vfioVF},
			wantEnv: map[string]string{
				"PCIDEVICE_INTEL_COM_DPDK": vfioVF,
				"PCIDEVICE_INTEL_COM_DPDK_INFO": `{"0000:3b:01.6":{"generic":{"deviceID":"0000:3b:01.6"},` +
					`"vfio":{"dev-mount":"/dev/vfio/noiommu-8","mount":"/dev/vfio/vfio"}}}`,
			},
			wantSpecs: []spec{rw("/dev/vfio/vfio"), rw("/dev/vfio/noiommu-8")},
		},
		{
			name:    "RDMA VF",
			res:     pools.Resource{Prefix: "nvidia.com", Name: "ib", IsRDMA: true},
			devices: n.devices(t, ibPF), allocate: []string{ibVF},
			wantEnv: map[string]string{
				"PCIDEVICE_NVIDIA_COM_IB": ibVF,
				"PCIDEVICE_NVIDIA_COM_IB_INFO": `{"0000:41:01.0":{"generic":{"deviceID":"0000:41:01.0"},` +
					`"rdma":{"issm":"/dev/infiniband/issm1","rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"mlx5_1",` +
					`"umad":"/dev/infiniband/umad1","uverbs":"/dev/infiniband/uverbs1"}}}`,
			},
			wantSpecs: []spec{rw("/dev/infiniband/uverbs1"), rw("/dev/infiniband/umad1"), rw("/dev/infiniband/issm1"), rw("/dev/infiniband/rdma_cm")},
			wantInfo:  map[string]*devinfo.DeviceInfo{ibVF: devinfo.NewPCI(devinfo.PCI{PCIAddress: ibVF, PFPCIAddress: ibPF, RDMADevice: "mlx5_1"})},
		},
		{
			name:    "RDMA VFs share rdma_cm",
			res:     pools.Resource{Prefix: "nvidia.com", Name: "ib", IsRDMA: true},
			devices: n.devices(t, ibPF), allocate: []string{ibVF, ibVF1},
			wantEnv: map[string]string{
				"PCIDEVICE_NVIDIA_COM_IB": "0000:41:01.0,0000:41:01.1",
				"PCIDEVICE_NVIDIA_COM_IB_INFO": `{"0000:41:01.0":{"generic":{"deviceID":"0000:41:01.0"},` +
					`"rdma":{"issm":"/dev/infiniband/issm1","rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"mlx5_1",` +
					`"umad":"/dev/infiniband/umad1","uverbs":"/dev/infiniband/uverbs1"}},` +
					`"0000:41:01.1":{"generic":{"deviceID":"0000:41:01.1"},` +
					`"rdma":{"issm":"/dev/infiniband/issm2","rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"mlx5_2",` +
					`"umad":"/dev/infiniband/umad2","uverbs":"/dev/infiniband/uverbs2"}}}`,
			},
			wantSpecs: []spec{
				rw("/dev/infiniband/uverbs1"), rw("/dev/infiniband/umad1"), rw("/dev/infiniband/issm1"), rw("/dev/infiniband/rdma_cm"),
				rw("/dev/infiniband/uverbs2"), rw("/dev/infiniband/umad2"), rw("/dev/infiniband/issm2"),
			},
		},
		{
			name:    "RDMA device with two ports: _INFO names port 1's nodes",
			res:     pools.Resource{Prefix: "nvidia.com", Name: "ib", IsRDMA: true},
			devices: []offer.State{twoPorts}, allocate: []string{ibVF},
			wantEnv: map[string]string{
				"PCIDEVICE_NVIDIA_COM_IB": ibVF,
				"PCIDEVICE_NVIDIA_COM_IB_INFO": `{"0000:41:01.0":{"generic":{"deviceID":"0000:41:01.0"},` +
					`"rdma":{"issm":"/dev/infiniband/issm1","rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"mlx5_1",` +
					`"umad":"/dev/infiniband/umad1","uverbs":"/dev/infiniband/uverbs1"}}}`,
			},
			wantSpecs: []spec{
				rw("/dev/infiniband/uverbs1"), rw("/dev/infiniband/umad1"), rw("/dev/infiniband/umad9"),
				rw("/dev/infiniband/issm1"), rw("/dev/infiniband/issm9"), rw("/dev/infiniband/rdma_cm"),
			},
		},
		{
			name:    "RDMA VF in a pool without isRdma: no RDMA",
			res:     pools.Resource{Prefix: "nvidia.com", Name: "ipoib"},
			devices: n.devices(t, ibPF), allocate: []string{ibVF},
			wantEnv: map[string]string{
				"PCIDEVICE_NVIDIA_COM_IPOIB":      ibVF,
				"PCIDEVICE_NVIDIA_COM_IPOIB_INFO": `{"0000:41:01.0":{"generic":{"deviceID":"0000:41:01.0"}}}`,
			},
			wantInfo: map[string]*devinfo.DeviceInfo{ibVF: devinfo.NewPCI(devinfo.PCI{PCIAddress: ibVF, PFPCIAddress: ibPF})},
		},
		{
			name:    "UIO VF",
			res:     pools.Resource{Prefix: "intel.com", Name: "dpdk_uio"},
			devices: n.devices(t, pf1), allocate: []string{uioVF},
			wantEnv: map[string]string{
				"PCIDEVICE_INTEL_COM_DPDK_UIO":      uioVF,
				"PCIDEVICE_INTEL_COM_DPDK_UIO_INFO": `{"0000:3e:01.5":{"generic":{"deviceID":"0000:3e:01.5"},"uio":{"mount":"/dev/uio0"}}}`,
			},
			wantSpecs: []spec{rw("/dev/uio0")},
			wantInfo:  map[string]*devinfo.DeviceInfo{uioVF: devinfo.NewPCI(devinfo.PCI{PCIAddress: uioVF, PFPCIAddress: pf1})},
		},
		{
			name:    "vhost vDPA",
			res:     pools.Resource{Prefix: "redhat.com", Name: "vdpa", VDPAType: "vhost"},
			devices: []offer.State{n.device(t, vdpaVF)}, allocate: []string{vdpaVF},
			wantEnv: map[string]string{
				"PCIDEVICE_REDHAT_COM_VDPA":      vdpaVF,
				"PCIDEVICE_REDHAT_COM_VDPA_INFO": `{"0000:3e:01.0":{"generic":{"deviceID":"0000:3e:01.0"},"vdpa":{"mount":"/dev/vhost-vdpa-0"}}}`,
			},
			wantSpecs: []spec{rw("/dev/vhost-vdpa-0")},
			wantInfo: map[string]*devinfo.DeviceInfo{vdpaVF: devinfo.NewVDPA(devinfo.VDPA{
				ParentDevice: vdpaName, Driver: "vhost", Path: "/dev/vhost-vdpa-0", PCIAddress: vdpaVF, PFPCIAddress: pf1,
			})},
		},
		{
			name:    "vhost-net",
			res:     pools.Resource{Prefix: "intel.com", Name: "vhost", NeedVhostNet: true},
			devices: n.devices(t, pf0), allocate: []string{netVF},
			wantEnv: map[string]string{
				"PCIDEVICE_INTEL_COM_VHOST": netVF,
				"PCIDEVICE_INTEL_COM_VHOST_INFO": `{"0000:3b:01.0":{"generic":{"deviceID":"0000:3b:01.0"},` +
					`"vhost":{"net-mount":"/dev/vhost-net","tun-mount":"/dev/net/tun"}}}`,
			},
			wantSpecs: []spec{rw("/dev/vhost-net"), rw("/dev/net/tun")},
			wantInfo:  map[string]*devinfo.DeviceInfo{netVF: devinfo.NewPCI(devinfo.PCI{PCIAddress: netVF, PFPCIAddress: pf0, VhostNet: "/dev/vhost-net"})},
		},
		{
			name: "additional info: the device's own entry wins over *",
			res: pools.Resource{Prefix: "intel.com", Name: "extra", AdditionalInfo: map[string]map[string]string{
				"*": {"vlan": "10", "site": "a"}, netVF: {"vlan": "20"},
			}},
			devices: n.devices(t, pf0), allocate: []string{netVF, "0000:3b:01.1"},
			wantEnv: map[string]string{
				"PCIDEVICE_INTEL_COM_EXTRA": "0000:3b:01.0,0000:3b:01.1",
				"PCIDEVICE_INTEL_COM_EXTRA_INFO": `{"0000:3b:01.0":{"extra":{"site":"a","vlan":"20"},"generic":{"deviceID":"0000:3b:01.0"}},` +
					`"0000:3b:01.1":{"extra":{"site":"a","vlan":"10"},"generic":{"deviceID":"0000:3b:01.1"}}}`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := New(tt.res, Options{PluginDir: dir, DevinfoDir: dir, DevRoot: n.node.DevRoot(), Ledger: openLedger(t)})
			p.SetDevices(tt.devices)
			resp, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: tt.allocate}},
			})
			if err != nil {
				t.Fatal(err)
			}
			c := resp.ContainerResponses[0]
			if !reflect.DeepEqual(c.Envs, tt.wantEnv) {
				t.Errorf("env\n got %q\nwant %q", c.Envs, tt.wantEnv)
			}
			for name := range c.Envs {
				if !validEnvName.MatchString(name) {
					t.Errorf("env %q is not a valid variable name", name)
				}
			}
			if got := specsOf(c); !reflect.DeepEqual(got, tt.wantSpecs) {
				t.Errorf("device specs\n got %v\nwant %v", got, tt.wantSpecs)
			}
			checkDeviceInfo(t, dir, tt.res.FullName(), tt.allocate, tt.wantInfo)
		})
	}
}

// withSecondPort gives the device's RDMA device a second port, umad9 and
// issm9, listed as discovery lists them: by kind, then by name.
func withSecondPort(d offer.State, ib string) offer.State {
	rdma := *d.Function.RDMA
	node := func(name string) string { return filepath.Join(ib, name) }
	rdma.CharDevices = []string{node("uverbs1"), node("umad1"), node("umad9"), node("issm1"), node("issm9"), node("rdma_cm")}
	return edited(d, func(fn *discovery.Function) { fn.RDMA = &rdma })
}

// checkDeviceInfo checks that every allocated device has its file, with
// the content want gives when it has an entry.
func checkDeviceInfo(t *testing.T, dir, resource string, allocated []string, want map[string]*devinfo.DeviceInfo) {
	t.Helper()
	for _, id := range allocated {
		got, err := devinfo.ReadFile(filepath.Join(dir, devinfo.FileName(resource, id)))
		if err != nil {
			t.Errorf("device info of %s: %v", id, err)
			continue
		}
		if w, ok := want[id]; ok && !reflect.DeepEqual(got, w) {
			t.Errorf("device info of %s\n got %+v\nwant %+v", id, got, w)
		}
	}
}

func TestAllocateRejects(t *testing.T) {
	n := newTestNode(t)
	tests := []struct {
		name    string
		ids     []string
		wantErr string
	}{
		{"unknown device", []string{netVF, "0000:99:00.0"}, `device "0000:99:00.0" is not a device of the pool`},
		{"device of another pool", []string{ibVF}, `device "0000:41:01.0" is not a device of the pool`},
		{"the same device twice", []string{netVF, netVF}, `device "0000:3b:01.0" requested twice`},
		{"no device", nil, "a container request without devices"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := New(pools.Resource{Prefix: "intel.com", Name: "a"}, Options{PluginDir: dir, DevinfoDir: dir, Ledger: openLedger(t)})
			p.SetDevices(n.devices(t, pf0))
			_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:3b:01.1"}}, {DevicesIds: tt.ids}},
			})
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Allocate error = %v, want InvalidArgument with %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), "intel.com/a") {
				t.Errorf("error %q does not name the resource", err)
			}
		})
	}
}

// TestAllocateRefusedByTheLedger: Allocate is a reservation in the device
// ledger, whatever the plugin last listed: a device a claim holds, one the
// ledger judges unhealthy, one a fence withdraws and any device while a
// source of holders cannot be read are refused with FailedPrecondition
// naming the device and why, and nothing is written for them.
func TestAllocateRefusedByTheLedger(t *testing.T) {
	n := newTestNode(t)
	claim := ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "c", UID: "uid-c"}
	tests := []struct {
		name    string
		book    func(t *testing.T) *ledger.Book
		wantErr string
	}{
		{"held by a claim", func(t *testing.T) *ledger.Book {
			b := openLedger(t)
			if err := b.Reserve(context.Background(), ledger.Request{Devices: []string{netVF}, Holder: claim}); err != nil {
				t.Fatal(err)
			}
			return b
		}, "device 0000:3b:01.0 is held by claim ns/c"},
		{"unhealthy", func(t *testing.T) *ledger.Book {
			b := openLedger(t)
			b.Judge(ledger.Verdicts{Unhealthy: map[string]string{netVF: "PF 0000:3b:00.0 link enp59s0f0 is down"}})
			return b
		}, "device 0000:3b:01.0 is unhealthy: PF 0000:3b:00.0 link enp59s0f0 is down"},
		{"fenced", func(t *testing.T) *ledger.Book {
			b := openLedger(t)
			f := ledger.Fence{Key: "k", Devices: []string{netVF}, Reason: "its pool is switching front end"}
			if err := b.Fence(context.Background(), f, false); err != nil {
				t.Fatal(err)
			}
			return b
		}, "device 0000:3b:01.0 is fenced: its pool is switching front end"},
		{"holders unknown", func(t *testing.T) *ledger.Book {
			src := ledger.Sources{PodResourcesSocket: filepath.Join(t.TempDir(), "no-kubelet.sock")}
			b := ledger.NewBook(ledger.BookOptions{Sources: src})
			b.Judge(ledger.Verdicts{})
			if err := b.Load(context.Background()); err != nil {
				t.Fatal(err)
			}
			return b
		}, "device 0000:3b:01.0: who holds it is unknown: kubelet PodResources"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			p := New(pools.Resource{Prefix: "intel.com", Name: "a"}, Options{PluginDir: dir, DevinfoDir: dir, Ledger: tt.book(t)})
			p.SetDevices(n.devices(t, pf0))
			_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
				ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{netVF}}},
			})
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Allocate error = %v, want FailedPrecondition with %q", err, tt.wantErr)
			}
			if files, _ := devinfo.List(dir); len(files) > 0 {
				t.Errorf("device-info files written for a refused allocation: %v", files)
			}
		})
	}
}

func TestAllocateFailsWhenDeviceInfoCannotBeWritten(t *testing.T) {
	n := newTestNode(t)
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := New(pools.Resource{Prefix: "intel.com", Name: "a"}, Options{DevinfoDir: filepath.Join(file, "dp"), Ledger: openLedger(t)})
	p.SetDevices(n.devices(t, pf0))
	_, err := p.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{netVF}}},
	})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), file) {
		t.Fatalf("Allocate error = %v, want Internal naming %s", err, file)
	}
}
