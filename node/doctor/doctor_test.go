package doctor_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/doctor"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// e810 is one E810 PF (ens1f0) with 4 iavf VFs, on a one-NUMA-node machine.
var e810 = virtualnode.PFSpec{Model: "E810-C", VFs: 4, Names: []string{"ens1f0"}}

const netdevPool = `resourceList: [{resourceName: netdev, selectors: {drivers: [iavf]}}]`
const dpdkPool = `resourceList: [{resourceName: dpdk, selectors: {drivers: [vfio-pci]}}]`
const rdmaPool = `resourceList: [{resourceName: rdma, selectors: {isRdma: true}}]`

// setup changes the virtual node's sysfs tree before the doctor looks.
type setup func(t *testing.T, sys string)

func write(rel, content string) setup {
	return func(t *testing.T, sys string) {
		path := filepath.Join(sys, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(rel string) setup {
	return func(t *testing.T, sys string) {
		entries, err := filepath.Glob(filepath.Join(sys, rel))
		if err != nil || len(entries) == 0 {
			t.Fatalf("nothing at %s to remove", rel)
		}
		for _, e := range entries {
			if err := os.RemoveAll(e); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// want is a finding, matched by severity, check and substrings of its
// subject and message.
type want struct {
	severity         doctor.Severity
	check            string
	subject, message string
}

func (w want) String() string {
	return fmt.Sprintf("%s %s %q: %q", w.severity, w.check, w.subject, w.message)
}

func (w want) matches(f doctor.Finding) bool {
	return f.Severity == w.severity && f.Check == w.check && strings.Contains(f.Subject, w.subject) && strings.Contains(f.Message, w.message)
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		pfs    []virtualnode.PFSpec
		config string
		setup  []setup
		want   []want // exactly these, in any order
	}{
		{name: "a node ready for its netdev pool", pfs: []virtualnode.PFSpec{e810}, config: netdevPool},
		{name: "a DPDK pool whose driver is not loaded", pfs: []virtualnode.PFSpec{e810}, config: dpdkPool, want: []want{
			{doctor.Error, "driver", "pool intel.com/dpdk", "vfio-pci driver, which is not loaded"},
			{doctor.Warning, "hugepages", "pool intel.com/dpdk", "no hugepages"},
		}},
		{name: "a DPDK pool on a ready node", config: dpdkPool,
			pfs:   []virtualnode.PFSpec{{Model: "E810-C", VFs: 4, VFIO: "0-3", Names: []string{"ens1f0"}}},
			setup: []setup{write("kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "4\n")}},
		{name: "no hugepages on the NUMA node of a DPDK pool's VFs", config: dpdkPool,
			pfs: []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 2, VFIO: "0-1", NUMA: []int{0, 1}, Names: []string{"ens1f0", "ens2f0"}}},
			setup: []setup{write("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n"),
				write("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "512\n"),
				write("devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "0\n")},
			want: []want{{doctor.Warning, "hugepages", "pool intel.com/dpdk", "NUMA node 1, where its DPDK devices are, has no hugepages"}}},
		{name: "hugepages on every NUMA node of a DPDK pool's VFs", config: dpdkPool,
			pfs: []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 2, VFIO: "0-1", NUMA: []int{0, 1}, Names: []string{"ens1f0", "ens2f0"}}},
			setup: []setup{write("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "1024\n"),
				write("devices/system/node/node0/hugepages/hugepages-2048kB/nr_hugepages", "512\n"),
				write("devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "512\n")}},
		{name: "the IOMMU off under a DPDK pool", config: dpdkPool,
			pfs:   []virtualnode.PFSpec{{Model: "E810-C", VFs: 4, VFIO: "0-3", Names: []string{"ens1f0"}}},
			setup: []setup{remove("kernel/iommu_groups/*"), write("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n")},
			want:  []want{{doctor.Error, "iommu", "node", "the IOMMU is off"}}},
		{name: "the IOMMU off, no DPDK pool", pfs: []virtualnode.PFSpec{e810}, config: netdevPool,
			setup: []setup{remove("kernel/iommu_groups/*")},
			want:  []want{{doctor.Warning, "iommu", "node", "the IOMMU is off"}}},
		{name: "a VF sharing its IOMMU group", config: dpdkPool,
			pfs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 2, VFIO: "0-1", Names: []string{"ens1f0"}}},
			setup: []setup{func(t *testing.T, sys string) {
				// Group every function of the node with the PF, as a
				// root port without ACS would.
				vf := filepath.Join(sys, "bus/pci/devices/0000:3b:01.0")
				target, err := os.Readlink(filepath.Join(vf, "iommu_group"))
				if err != nil {
					t.Fatal(err)
				}
				group := filepath.Join(filepath.Dir(filepath.Join(vf, target)), filepath.Base(target), "devices")
				if err := os.Symlink("../../../../bus/pci/devices/0000:3b:00.0", filepath.Join(group, "0000:3b:00.0")); err != nil {
					t.Fatal(err)
				}
			}, write("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n")},
			want: []want{{doctor.Warning, "iommu", "VF 0000:3b:01.0", "shares IOMMU group"}}},
		{name: "SR-IOV off in the firmware", config: netdevPool,
			pfs:  []virtualnode.PFSpec{e810, {Model: "E810-C", SRIOVOff: true, Names: []string{"ens2f0"}}},
			want: []want{{doctor.Warning, "sriov", "(ens2f0)", "SR-IOV is disabled in the NIC's firmware"}}},
		{name: "SR-IOV off under a vfLayout", config: netdevPool + "\nvfLayouts: [{name: two, selectors: {pfNames: [ens2f0]}, numVfs: 2}]",
			pfs:  []virtualnode.PFSpec{e810, {Model: "E810-C", SRIOVOff: true, Names: []string{"ens2f0"}}},
			want: []want{{doctor.Error, "sriov", "(ens2f0)", "vfLayout two asks for 2 VFs"}}},
		{name: "no VFs enabled", config: netdevPool, pfs: []virtualnode.PFSpec{e810, {Model: "E810-C", Names: []string{"ens2f0"}}},
			want: []want{{doctor.Warning, "sriov", "(ens2f0)", "no VFs enabled"}}},
		{name: "no VFs enabled but a layout declares them", pfs: []virtualnode.PFSpec{e810, {Model: "E810-C", Names: []string{"ens2f0"}}},
			config: netdevPool + "\nvfLayouts: [{name: two, selectors: {pfNames: [ens2f0]}, numVfs: 2}]"},
		{name: "a layout beyond sriov_totalvfs", pfs: []virtualnode.PFSpec{e810},
			config: netdevPool + "\nvfLayouts: [{name: many, selectors: {pfNames: [ens1f0]}, numVfs: 300}]",
			want:   []want{{doctor.Error, "sriov", "PF 0000:3b:00.0", "numVfs 300 is more than"}}},
		{name: "switchdev on a model that cannot take it", pfs: []virtualnode.PFSpec{e810, {Model: "QL41000", VFs: 2, Names: []string{"ens2f0"}}},
			config: netdevPool + "\nvfLayouts: [{name: ovs, selectors: {pfNames: [ens2f0]}, numVfs: 2, eswitchMode: switchdev}]",
			want:   []want{{doctor.Error, "sriov", "PF 0000:", "model QL41000 cannot take switchdev mode"}}},
		{name: "switchdev on a model that can", pfs: []virtualnode.PFSpec{e810},
			config: netdevPool + "\nvfLayouts: [{name: ovs, selectors: {pfNames: [ens1f0]}, numVfs: 2, eswitchMode: switchdev}]"},
		{name: "RDMA shared by every namespace", pfs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", VFs: 2}}, config: rdmaPool,
			setup: []setup{write("module/ib_core/parameters/netns_mode", "Y\n")},
			want:  []want{{doctor.Warning, "rdma", "pool intel.com/rdma", "shared namespace mode"}}},
		{name: "RDMA exclusive", pfs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", VFs: 2}}, config: rdmaPool,
			setup: []setup{write("module/ib_core/parameters/netns_mode", "N\n")}},
		{name: "RDMA not loaded", pfs: []virtualnode.PFSpec{{Model: "ConnectX-6 Dx", VFs: 2}}, config: rdmaPool,
			want: []want{{doctor.Info, "rdma", "pool intel.com/rdma", "RDMA namespace mode not checked: ib_core is not loaded"}}},
		{name: "a PF whose link is down", pfs: []virtualnode.PFSpec{e810}, config: netdevPool,
			setup: []setup{write("class/net/ens1f0/operstate", "down\n")},
			want:  []want{{doctor.Warning, "link", "(ens1f0)", "without carrier"}}},
		{name: "two NUMA nodes, kubelet's config not given", config: netdevPool,
			pfs: []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 2, NUMA: []int{0, 1}}}},
		{name: "vfio-pci without vfio_iommu_type1", config: dpdkPool,
			pfs:   []virtualnode.PFSpec{{Model: "E810-C", VFs: 4, VFIO: "0-3", Names: []string{"ens1f0"}}},
			setup: []setup{write("module/vfio/refcnt", "1\n"), write("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n")},
			want:  []want{{doctor.Error, "driver", "pool intel.com/dpdk", "vfio is loaded without vfio_iommu_type1"}}},
		{name: "vfio with its IOMMU backend", config: dpdkPool,
			pfs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 4, VFIO: "0-3", Names: []string{"ens1f0"}}},
			setup: []setup{write("module/vfio/refcnt", "1\n"), write("module/vfio_iommu_type1/refcnt", "1\n"),
				write("kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "512\n")}},
		{name: "no pool config", pfs: []virtualnode.PFSpec{e810}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := doctorNode(t, tt.pfs, tt.config, tt.setup...)
			assertFindings(t, doctor.Check(context.Background(), n), tt.want)
		})
	}
}

// TestKubelet checks what the doctor says of kubelet: its topology
// manager on a node with two NUMA nodes, and its PodResources socket.
func TestKubelet(t *testing.T) {
	dir := sockdir.New(t)
	answering := filepath.Join(dir, "kubelet.sock")
	ln, err := net.Listen("unix", answering)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stale := filepath.Join(dir, "stale.sock")
	old, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close()
	kubelet := func(content string) string {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name          string
		kubeletConfig string
		socket        string
		want          []want
	}{
		{"policy none", kubelet("kind: KubeletConfiguration\ntopologyManagerPolicy: none\n"), answering,
			[]want{{doctor.Warning, "numa", "kubelet", "topologyManagerPolicy is none on a node with 2 NUMA nodes"}}},
		{"policy unset", kubelet("kind: KubeletConfiguration\n"), answering,
			[]want{{doctor.Warning, "numa", "kubelet", "topologyManagerPolicy is none"}}},
		{"single-numa-node", kubelet("topologyManagerPolicy: single-numa-node\n"), answering, nil},
		{"config unreadable", filepath.Join(dir, "none.yaml"), answering,
			[]want{{doctor.Info, "numa", "kubelet", "topology manager policy not checked"}}},
		{"config malformed", kubelet("topologyManagerPolicy: [\n"), answering,
			[]want{{doctor.Info, "numa", "kubelet", "topology manager policy not checked"}}},
		{"no PodResources socket", kubelet("topologyManagerPolicy: restricted\n"), filepath.Join(dir, "missing.sock"),
			[]want{{doctor.Error, "kubelet", "missing.sock", "PodResources socket is missing"}}},
		{"nothing answers", kubelet("topologyManagerPolicy: restricted\n"), stale,
			[]want{{doctor.Error, "kubelet", "stale.sock", "nothing answers"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := doctorNode(t, []virtualnode.PFSpec{{Model: "E810-C", Count: 2, VFs: 2, NUMA: []int{0, 1}}}, netdevPool)
			n.KubeletConfig, n.PodResourcesSocket = tt.kubeletConfig, tt.socket
			assertFindings(t, doctor.Check(context.Background(), n), tt.want)
		})
	}
}

// TestCDIDir: pools handed out through CDI need the runtime's CDI
// directory; device-node pools do not.
func TestCDIDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "cdi")
	tests := []struct {
		name, config, dir string
		want              []want
	}{
		{"DRA pool, no directory", `resourceList: [{resourceName: netdev, mode: dra, selectors: {drivers: [iavf]}}]`, missing,
			[]want{{doctor.Warning, "cdi", "pool intel.com/netdev", "does not exist"}}},
		{"CDI pool, no directory", `resourceList: [{resourceName: netdev, cdi: true, selectors: {drivers: [iavf]}}]`, missing,
			[]want{{doctor.Warning, "cdi", "pool intel.com/netdev", "does not exist"}}},
		{"DRA pool, directory there", `resourceList: [{resourceName: netdev, mode: dra, selectors: {drivers: [iavf]}}]`, t.TempDir(), nil},
		{"device nodes only", netdevPool, missing, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := doctorNode(t, []virtualnode.PFSpec{e810}, tt.config)
			n.CDIDir = tt.dir
			assertFindings(t, doctor.Check(context.Background(), n), tt.want)
		})
	}
}

func doctorNode(t *testing.T, pfs []virtualnode.PFSpec, config string, setups ...setup) doctor.Node {
	t.Helper()
	db := vnodetest.OpenDB(t)
	node := vnodetest.BuildForTest(t, &virtualnode.Spec{Name: "doctor", PFs: pfs}, db, false)
	for _, s := range setups {
		s(t, node.SysRoot())
	}
	inv, err := discovery.Discover(context.Background(), discovery.Options{
		SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(), DB: db, ESwitch: vnodetest.NoESwitch{}})
	if err != nil {
		t.Fatal(err)
	}
	n := doctor.Node{Inventory: inv, SysfsRoot: node.SysRoot()}
	if config != "" {
		if n.Config, err = pools.Parse([]byte(config)); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func assertFindings(t *testing.T, got []doctor.Finding, wants []want) {
	t.Helper()
	left := append([]doctor.Finding(nil), got...)
	for _, w := range wants {
		i := indexOf(left, w)
		if i < 0 {
			t.Errorf("no finding %s", w)
			continue
		}
		left = append(left[:i], left[i+1:]...)
	}
	for _, f := range left {
		t.Errorf("unexpected finding: %+v", f)
	}
}

func indexOf(fs []doctor.Finding, w want) int {
	for i, f := range fs {
		if w.matches(f) {
			return i
		}
	}
	return -1
}

// TestUnfitLayoutFix: the fix offered for a layout a PF cannot take
// answers its reason: fewer VFs for a count beyond sriov_totalvfs, no
// switchdev (or the model declared able) for a mode it cannot take.
func TestUnfitLayoutFix(t *testing.T) {
	for _, tt := range []struct {
		name, layout, fix string
	}{
		{"count", "{name: many, selectors: {pfNames: [ens2f0]}, numVfs: 300}", "lower numVfs"},
		{"switchdev", "{name: ovs, selectors: {pfNames: [ens2f0]}, numVfs: 2, eswitchMode: switchdev}", "drop eswitchMode switchdev"},
	} {
		n := doctorNode(t, []virtualnode.PFSpec{e810, {Model: "QL41000", VFs: 2, Names: []string{"ens2f0"}}}, netdevPool+"\nvfLayouts: ["+tt.layout+"]")
		var fixes []string
		for _, f := range doctor.Check(context.Background(), n) {
			if f.Check == "sriov" && f.Severity == doctor.Error {
				fixes = append(fixes, f.Fix)
			}
		}
		if len(fixes) != 1 || !strings.HasPrefix(fixes[0], tt.fix) {
			t.Errorf("%s: fixes %q, want one starting %q", tt.name, fixes, tt.fix)
		}
	}
}
