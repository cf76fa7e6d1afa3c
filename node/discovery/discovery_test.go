package discovery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// fakeESwitch is an in-memory devlink: PCI address to eswitch mode.
type fakeESwitch map[string]string

func (f fakeESwitch) ESwitchMode(_ context.Context, addr string) (string, error) {
	return f[addr], nil
}

// buildTree makes a tree-only virtual node (no root needed).
func buildTree(t testing.TB, db *hwdb.DB, spec *virtualnode.Spec) *virtualnode.Node {
	t.Helper()
	return vnodetest.BuildForTest(t, spec, db, false)
}

func discover(t testing.TB, db *hwdb.DB, node *virtualnode.Node, opts discovery.Options) *discovery.Inventory {
	t.Helper()
	opts.SysfsRoot, opts.DevRoot, opts.DB = node.SysRoot(), node.DevRoot(), db
	if opts.ESwitch == nil {
		opts.ESwitch = vnodetest.NoESwitch{}
	}
	if opts.VDPA == nil {
		opts.VDPA = vnodetest.VDPA(nil)
	}
	inv, err := discovery.Discover(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestDiscoverFindsEveryFunction checks discovery against what the virtual
// node says it built: every PF, VF and NIC, with the fields pools and CNI
// plugins rely on.
func TestDiscoverFindsEveryFunction(t *testing.T) {
	db := vnodetest.OpenDB(t)
	node := buildTree(t, db, virtualnode.DefaultSpec())
	inv := discover(t, db, node, discovery.Options{})
	built := node.Devices()
	if inv.Len() != len(built) {
		t.Errorf("inventory has %d functions, the node built %d", inv.Len(), len(built))
	}
	for _, want := range built {
		got, ok := inv.Function(want.Addr)
		if !ok {
			t.Errorf("%s: missing from the inventory", want.Addr)
			continue
		}
		checkFunction(t, node.DevRoot(), got, &want)
	}
	if len(inv.PFs) != 3 || len(inv.NICs) != 1 {
		t.Errorf("got %d PFs and %d NICs, want 3 and 1", len(inv.PFs), len(inv.NICs))
	}
	for _, pf := range inv.PFs {
		checkPF(t, node, &pf)
	}
}

// TestInventoryJSONRoundTrip: an inventory read back from JSON answers
// lookups like the one discovery made.
func TestInventoryJSONRoundTrip(t *testing.T) {
	db := vnodetest.OpenDB(t)
	inv := discover(t, db, buildTree(t, db, virtualnode.DefaultSpec()), discovery.Options{})
	data, err := json.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	var back discovery.Inventory
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	if back.Len() != inv.Len() {
		t.Errorf("read back %d functions, want %d", back.Len(), inv.Len())
	}
	want, _ := inv.Function(ibVF1)
	got, ok := back.Function(ibVF1)
	if !ok || !reflect.DeepEqual(got, want) {
		t.Errorf("read back %s as %+v, want %+v", ibVF1, got, want)
	}
}

func checkFunction(t *testing.T, devRoot string, got *discovery.Function, want *virtualnode.Function) {
	t.Helper()
	if len(got.Problems) > 0 {
		t.Errorf("%s: unexpected problems %q", want.Addr, got.Problems)
	}
	for _, c := range []struct{ field, got, want string }{
		{"vendor", got.Vendor.String(), want.Vendor.String()},
		{"device", got.Device.String(), want.Device.String()},
		{"class", got.Class, fmt.Sprintf("0x%06x", want.Class)},
		{"driver", got.Driver, want.Driver},
		{"numa", strconv.Itoa(got.NUMANode), strconv.Itoa(want.NUMA)},
		{"iommu group", got.IOMMUGroup, strconv.Itoa(want.IOMMUGroup)},
		{"link type", string(got.LinkType), string(want.LinkType)},
		{"model", got.Model, want.Model},
		{"netdev", netdevName(got.Netdev), netdevNameBuilt(want.Netdev)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %s = %q, want %q", want.Addr, c.field, c.got, c.want)
		}
	}
	if want.Netdev != nil && got.Netdev != nil {
		if got.Netdev.HardwareAddr != want.Netdev.Address || got.Netdev.Ifindex != want.Netdev.Index {
			t.Errorf("%s: netdev %s address %s ifindex %d, want %s %d", want.Addr, got.Netdev.Name,
				got.Netdev.HardwareAddr, got.Netdev.Ifindex, want.Netdev.Address, want.Netdev.Index)
		}
	}
	if want.Driver == "vfio-pci" && !strings.HasSuffix(got.VFIODevice, "/vfio/"+strconv.Itoa(want.IOMMUGroup)) {
		t.Errorf("%s: vfio device %q, want .../vfio/%d", want.Addr, got.VFIODevice, want.IOMMUGroup)
	}
	checkRDMA(t, devRoot, got, want)
}

// checkRDMA: IB VFs carry 20-byte addresses whose last 8 bytes are the
// port GUID, and their GUIDs in the byte form CNI plugins take; RDMA
// devices list their verbs and MAD nodes and the node's rdma_cm.
func checkRDMA(t *testing.T, devRoot string, got *discovery.Function, want *virtualnode.Function) {
	t.Helper()
	if (got.RDMA == nil) != (want.RDMA == nil) {
		t.Errorf("%s: rdma %+v, want %+v", want.Addr, got.RDMA, want.RDMA)
		return
	}
	if want.RDMA == nil {
		return
	}
	if got.RDMA.Device != want.RDMA.Name || got.RDMA.NodeGUID != bytesGUID(want.RDMA.NodeGUID) || got.RDMA.PortGUID != bytesGUID(want.RDMA.PortGUID) {
		t.Errorf("%s: rdma %+v, want device %s node GUID %s port GUID %s", want.Addr, got.RDMA, want.RDMA.Name, want.RDMA.NodeGUID, want.RDMA.PortGUID)
	}
	ib := filepath.Join(devRoot, "infiniband")
	wantNodes := []string{
		filepath.Join(ib, "uverbs"+strconv.Itoa(want.RDMA.Uverbs)),
		filepath.Join(ib, "umad"+strconv.Itoa(want.RDMA.Umad)),
		filepath.Join(ib, "issm"+strconv.Itoa(want.RDMA.Umad)),
		filepath.Join(ib, "rdma_cm"),
	}
	if !slices.Equal(got.RDMA.CharDevices, wantNodes) {
		t.Errorf("%s: rdma char devices %q, want %q", want.Addr, got.RDMA.CharDevices, wantNodes)
	}
	if want.LinkType == hwdb.InfiniBand && got.Netdev != nil {
		if got.Netdev.AddrLen != 20 || !strings.HasSuffix(got.Netdev.HardwareAddr, got.RDMA.PortGUID) {
			t.Errorf("%s: IPoIB address %s (%d bytes) does not end in port GUID %s", want.Addr, got.Netdev.HardwareAddr, got.Netdev.AddrLen, got.RDMA.PortGUID)
		}
	}
}

func checkPF(t *testing.T, node *virtualnode.Node, pf *discovery.PF) {
	t.Helper()
	want, _ := node.Device(pf.Address)
	if pf.SRIOV.TotalVFs != want.SRIOV.TotalVFs || pf.SRIOV.NumVFs != want.SRIOV.NumVFs || len(pf.VFs) != want.SRIOV.NumVFs {
		t.Errorf("%s: sriov %+v with %d VFs, want total %d enabled %d", pf.Address, pf.SRIOV, len(pf.VFs), want.SRIOV.TotalVFs, want.SRIOV.NumVFs)
	}
	for i, vf := range pf.VFs {
		built, _ := node.Device(vf.Address)
		if vf.Index != i || vf.Index != built.VFIndex || vf.PF != pf.Address || built.PF != pf.Address {
			t.Errorf("%s: VF %d of %s, node says VF %d of %s", vf.Address, vf.Index, vf.PF, built.VFIndex, built.PF)
		}
	}
	if pf.ESwitch.Mode != discovery.ModeLegacy || !strings.Contains(pf.ESwitch.Reason, "devlink") {
		t.Errorf("%s: eswitch %+v, want legacy with a devlink reason", pf.Address, pf.ESwitch)
	}
	if len(pf.Excluded) != 1 || !strings.Contains(pf.Excluded[0], "VFs enabled") {
		t.Errorf("%s: excluded %q, want the reason that its VFs are offered instead", pf.Address, pf.Excluded)
	}
}

func netdevName(nd *discovery.Netdev) string {
	if nd == nil {
		return ""
	}
	return nd.Name
}

func netdevNameBuilt(nd *virtualnode.Netdev) string {
	if nd == nil {
		return ""
	}
	return nd.Name
}

// bytesGUID turns sysfs's "0c42:a103:0000:3b00" into "0c:42:a1:03:00:00:3b:00".
func bytesGUID(s string) string {
	hex := strings.ReplaceAll(s, ":", "")
	var parts []string
	for i := 0; i+2 <= len(hex); i += 2 {
		parts = append(parts, hex[i:i+2])
	}
	return strings.Join(parts, ":")
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
