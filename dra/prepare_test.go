package dra_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

const nodeName = "node-a"

// preparer is a driver kubelet does not know, with its directories and
// the device ledger it reserves in, which reads its checkpoint.
type preparer struct {
	drv    *dra.Driver
	opts   dra.Options
	ledger *ledger.Book
}

func newPreparer(t testing.TB, n *testNode, dir string, admin ...dra.VFAdmin) *preparer {
	t.Helper()
	opts := preparerOptions(n, dir)
	if len(admin) > 0 {
		opts.VFAdmin = admin[0]
	}
	return newPreparerWith(t, n, opts)
}

// preparerOptions are a preparer's options with its directories in dir.
func preparerOptions(n *testNode, dir string) dra.Options {
	return dra.Options{NodeName: nodeName, PluginDir: filepath.Join(dir, "plugin"), RegistrarDir: filepath.Join(dir, "registry"),
		CDIDir: filepath.Join(dir, "cdi"), DevinfoDir: filepath.Join(dir, "devinfo"), DevRoot: n.node.DevRoot(), SysfsRoot: n.node.SysRoot()}
}

// newPreparerWith is a preparer with opts and a device ledger of its own.
func newPreparerWith(t testing.TB, n *testNode, opts dra.Options) *preparer {
	t.Helper()
	book := openLedger(t, ledger.Sources{Checkpoint: dra.CheckpointPath("", opts.PluginDir)}, n.node.SysRoot())
	opts.Ledger = book
	drv, err := dra.NewUnregistered(opts)
	if err != nil {
		t.Fatal(err)
	}
	return &preparer{drv: drv, opts: opts, ledger: book}
}

// openLedger is a device ledger of src, read.
func openLedger(t testing.TB, src ledger.Sources, sysfs string) *ledger.Book {
	t.Helper()
	b := ledger.NewBook(ledger.BookOptions{Sources: src, SysfsRoot: sysfs})
	b.Judge(ledger.Verdicts{})
	if err := b.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func claim(uid string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-" + uid, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results}}},
	}
}

func alloc(request, device string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: request, Driver: dra.DefaultDriverName, Pool: nodeName, Device: device}
}

func (p *preparer) prepare(t *testing.T, c *resourceapi.ResourceClaim) kubeletplugin.PrepareResult {
	t.Helper()
	res, err := p.drv.PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
	if err != nil {
		t.Fatal(err)
	}
	return res[c.UID]
}

func (p *preparer) unprepare(t *testing.T, uid string) error {
	t.Helper()
	obj := kubeletplugin.NamespacedObject{UID: types.UID(uid)}
	obj.Namespace, obj.Name = "ns", "claim-"+uid
	res, err := p.drv.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{obj})
	if err != nil {
		t.Fatal(err)
	}
	return res[types.UID(uid)]
}

func (p *preparer) spec(t *testing.T, uid string) *cdispec.Spec {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(p.opts.CDIDir, dra.DefaultDriverName+"-"+uid+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var s cdispec.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestPrepare: a claim's container gets, through CDI, the device nodes and
// PCIDEVICE_* variables Allocate gives, and a device-info file per device.
func TestPrepare(t *testing.T) {
	n := newTestNode(t)
	tests := []struct {
		name      string
		claim     *resourceapi.ResourceClaim
		wantNodes map[string][]string // by device name
		wantEnv   []string
	}{
		{"two vfio-pci VFs", claim("uid-dpdk", alloc("vfs", "pci-0000-3b-01-6"), alloc("vfs", "pci-0000-3e-01-7")),
			map[string][]string{"pci-0000-3b-01-6": {"/dev/vfio/vfio", "/dev/vfio/8"}, "pci-0000-3e-01-7": {"/dev/vfio/vfio", "/dev/vfio/19"}},
			[]string{"PCIDEVICE_INTEL_COM_SRIOV_DPDK=0000:3b:01.6,0000:3e:01.7",
				`PCIDEVICE_INTEL_COM_SRIOV_DPDK_INFO={"0000:3b:01.6":{"generic":{"deviceID":"0000:3b:01.6"},"vfio":{"dev-mount":"/dev/vfio/8","mount":"/dev/vfio/vfio"}},` +
					`"0000:3e:01.7":{"generic":{"deviceID":"0000:3e:01.7"},"vfio":{"dev-mount":"/dev/vfio/19","mount":"/dev/vfio/vfio"}}}`}},
		{"a netdev VF and an InfiniBand VF", claim("uid-mixed", alloc("net", "pci-0000-3b-01-1"), alloc("ib", "pci-0000-41-01-0")),
			map[string][]string{"pci-0000-3b-01-1": nil, "pci-0000-41-01-0": {"/dev/infiniband/uverbs1", "/dev/infiniband/umad1", "/dev/infiniband/issm1", "/dev/infiniband/rdma_cm"}},
			[]string{"PCIDEVICE_INTEL_COM_SRIOV_FABRIC_A=0000:3b:01.1",
				`PCIDEVICE_INTEL_COM_SRIOV_FABRIC_A_INFO={"0000:3b:01.1":{"generic":{"deviceID":"0000:3b:01.1"}}}`,
				"PCIDEVICE_NVIDIA_COM_IB=0000:41:01.0",
				`PCIDEVICE_NVIDIA_COM_IB_INFO={"0000:41:01.0":{"generic":{"deviceID":"0000:41:01.0"},"rdma":{"issm":"/dev/infiniband/issm1","rdma_cm":"/dev/infiniband/rdma_cm","rdma_dev":"mlx5_1","umad":"/dev/infiniband/umad1","uverbs":"/dev/infiniband/uverbs1"}}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPreparer(t, n, t.TempDir())
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			res := p.prepare(t, tt.claim)
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			spec := p.spec(t, string(tt.claim.UID))
			if !reflect.DeepEqual(spec.ContainerEdits.Env, tt.wantEnv) {
				t.Errorf("env\n got %q\nwant %q", spec.ContainerEdits.Env, tt.wantEnv)
			}
			for i, d := range res.Devices {
				wantID := "hwnet.io/net=" + string(tt.claim.UID) + "-" + d.DeviceName
				if d.PoolName != nodeName || !reflect.DeepEqual(d.CDIDeviceIDs, []string{wantID}) || d.Requests[0] != tt.claim.Status.Allocation.Devices.Results[i].Request {
					t.Errorf("device %d: %+v, want CDI ID %s", i, d, wantID)
				}
				var nodes []string
				for _, node := range spec.Devices[i].ContainerEdits.DeviceNodes {
					nodes = append(nodes, node.Path)
				}
				if want := tt.wantNodes[d.DeviceName]; !reflect.DeepEqual(nodes, want) {
					t.Errorf("%s: nodes %q, want %q", d.DeviceName, nodes, want)
				}
				// CDI refuses a device without edits: a netdev VF, without
				// nodes, is still named in the environment.
				p := strings.Split(d.DeviceName, "-") // pci-0000-3b-01-6
				wantEnv := "HWNET_DEVICE_" + strings.ToUpper(strings.ReplaceAll(d.DeviceName, "-", "_")) + "=" + p[1] + ":" + p[2] + ":" + p[3] + "." + p[4]
				if env := spec.Devices[i].ContainerEdits.Env; len(env) != 1 || env[0] != wantEnv {
					t.Errorf("%s: env %q, want %s", d.DeviceName, env, wantEnv)
				}
			}
			files, err := devinfo.List(p.opts.DevinfoDir)
			if err != nil || len(files) != len(tt.wantNodes) {
				t.Errorf("device-info files %+v (%v), want %d", files, err, len(tt.wantNodes))
			}
		})
	}
}

// TestPrepareRefusedByTheLedger: prepare is a reservation in the device
// ledger, not a check of the last published devices: a device published
// free that a device plugin allocation took since, one judged unhealthy
// (whatever taints the claim tolerates) and one a fence withdraws are
// refused, naming the device and why, and nothing is written for the
// claim.
func TestPrepareRefusedByTheLedger(t *testing.T) {
	n := newTestNode(t)
	const vf = "0000:3b:01.6"
	tests := []struct {
		name  string
		setup func(t *testing.T, b *ledger.Book)
		want  string
	}{
		{"allocated through a device plugin since", func(t *testing.T, b *ledger.Book) {
			pod := ledger.Holder{Kind: ledger.Pod, Resource: "intel.com/sriov_dpdk"}
			if err := b.Reserve(context.Background(), ledger.Request{Devices: []string{vf}, Holder: pod}); err != nil {
				t.Fatal(err)
			}
		}, "device 0000:3b:01.6 is held by an allocation of intel.com/sriov_dpdk kubelet has not reported yet"},
		{"unhealthy", func(_ *testing.T, b *ledger.Book) {
			b.Judge(ledger.Verdicts{Unhealthy: map[string]string{vf: "bound to vfio-pci but its VFIO group device is missing"}})
		}, "device 0000:3b:01.6 is unhealthy: bound to vfio-pci but its VFIO group device is missing"},
		{"fenced", func(t *testing.T, b *ledger.Book) {
			if err := b.Fence(context.Background(), ledger.Fence{Key: "k", Devices: []string{vf}, Reason: "its pool is switching front end"}, false); err != nil {
				t.Fatal(err)
			}
		}, "device 0000:3b:01.6 is fenced: its pool is switching front end"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPreparer(t, n, t.TempDir())
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			tt.setup(t, p.ledger)
			res := p.prepare(t, claim("x", alloc("r", dra.DeviceName(vf))))
			if res.Err == nil || res.Err.Error() != tt.want {
				t.Fatalf("prepare: %v, want %q", res.Err, tt.want)
			}
			if files, _ := devinfo.List(p.opts.DevinfoDir); len(files) > 0 {
				t.Errorf("device-info files written for a refused claim: %v", files)
			}
			if _, err := os.Stat(filepath.Join(p.opts.CDIDir, dra.DefaultDriverName+"-x.json")); err == nil {
				t.Error("CDI spec written for a refused claim")
			}
		})
	}
}

// TestPrepareUnprepare: prepare is idempotent, refuses a device another
// claim holds and one the node does not publish; unprepare works from the
// checkpoint alone, after a restart, and twice.
func TestPrepareUnprepare(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	node := dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}
	p := newPreparer(t, n, dir)
	if err := p.drv.SetDevices(node, n.pools); err != nil {
		t.Fatal(err)
	}
	first := p.prepare(t, claim("a", alloc("r", "pci-0000-3b-01-6")))
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	if again := p.prepare(t, claim("a", alloc("r", "pci-0000-3b-01-6"))); !reflect.DeepEqual(again, first) {
		t.Errorf("second prepare %+v, want %+v", again, first)
	}
	admin := alloc("r", "pci-0000-3b-01-5")
	admin.AdminAccess = ptr.To(true)
	for _, tt := range []struct {
		claim *resourceapi.ResourceClaim
		want  string
	}{
		{claim("b", alloc("r", "pci-0000-3b-01-6")), `device 0000:3b:01.6 is held by claim ns/claim-a`},
		{claim("e", admin), `request "r": device pci-0000-3b-01-5: adminAccess is not supported by hwnet.io: a network device has one holder, and handing it to an admin pod as well would take it from that pod`},
		{claim("c", alloc("r", "pci-0000-3e-01-0")), `request "r": device pci-0000-3e-01-0 of pool node-a is not one this node publishes`},
		{&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{UID: "d"}}, "not allocated"},
	} {
		if res := p.prepare(t, tt.claim); res.Err == nil || res.Err.Error() != tt.want {
			t.Errorf("claim %s: err %v, want %q", tt.claim.UID, res.Err, tt.want)
		}
	}
	// A restarted agent has published nothing yet when kubelet unprepares.
	restarted := newPreparer(t, n, dir)
	for range 2 {
		if err := restarted.unprepare(t, "a"); err != nil {
			t.Fatal(err)
		}
	}
	left, _ := os.ReadDir(p.opts.CDIDir)
	files, _ := devinfo.List(p.opts.DevinfoDir)
	if len(left) != 0 || len(files) != 0 {
		t.Errorf("left behind: CDI specs %v, device-info files %v", left, files)
	}
	data, _ := os.ReadFile(filepath.Join(p.opts.PluginDir, "checkpoint.json"))
	if strings.Contains(string(data), "claim-a") {
		t.Errorf("checkpoint still holds claim a: %s", data)
	}
}

// TestUnprepare_KilledBeforeCheckpoint: an agent killed after a claim's
// CDI spec was written and before the checkpoint was saved leaves a spec
// the checkpoint does not know; kubelet's unprepare of the claim removes
// it by the claim's UID.
func TestUnprepare_KilledBeforeCheckpoint(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	p := newPreparer(t, n, dir)
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	if res := p.prepare(t, claim("k", alloc("r", "pci-0000-3b-01-6"))); res.Err != nil {
		t.Fatal(res.Err)
	}
	// The state the kill leaves: the spec, and no checkpoint saved.
	if err := os.Remove(filepath.Join(p.opts.PluginDir, "checkpoint.json")); err != nil {
		t.Fatal(err)
	}
	restarted := newPreparer(t, n, dir)
	if err := restarted.unprepare(t, "k"); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(p.opts.CDIDir); len(left) != 0 {
		t.Errorf("CDI specs left behind: %v", left)
	}
}

// TestUnprepare_CheckpointVersions: a checkpoint an older hwnet wrote,
// or a newer one (the agent rolled back), still unprepares; a torn one
// fails by name.
func TestUnprepare_CheckpointVersions(t *testing.T) {
	for _, tt := range []struct {
		name    string
		rewrite func(file map[string]any)
		wantErr string
	}{
		{"version 1", func(file map[string]any) { file["version"] = 1; delete(file, "checksum") }, ""},
		{"newer version", func(file map[string]any) {
			file["version"], file["checksum"], file["leases"] = 99, "sha256:x", []int{1}
		}, ""},
		{"edited", func(file map[string]any) { file["checksum"] = 1 }, "checksum mismatch"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			dir := t.TempDir()
			p := newPreparer(t, n, dir)
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			if res := p.prepare(t, claim("a", alloc("r", "pci-0000-3b-01-6"))); res.Err != nil {
				t.Fatal(res.Err)
			}
			path := filepath.Join(p.opts.PluginDir, "checkpoint.json")
			formattest.RewriteJSON(t, path, tt.rewrite)
			res, err := newPreparer(t, n, dir).drv.UnprepareResourceClaims(context.Background(),
				[]kubeletplugin.NamespacedObject{{UID: "a", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "claim-a"}}})
			if err == nil {
				err = res["a"]
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), path) {
					t.Errorf("unprepare: %v, want an error naming %s with %q", err, path, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if left, _ := os.ReadDir(p.opts.CDIDir); len(left) != 0 {
				t.Errorf("CDI specs left: %v", left)
			}
		})
	}
}

// TestCheckpointChangedBetweenCalls: the checkpoint a kubelet call saved
// is kept for the next call only while the file is the one it wrote: a
// file edited, or replaced (another hwnet, a rollback, by hand), is what
// the next call reads and changes.
func TestCheckpointChangedBetweenCalls(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, path string)
		check  func(t *testing.T, p *preparer, path string)
	}{
		{"edited in place", func(t *testing.T, path string) {
			formattest.RewriteJSON(t, path, func(file map[string]any) { file["checksum"] = 1 })
		}, func(t *testing.T, p *preparer, path string) {
			_, err := p.drv.UnprepareResourceClaims(context.Background(),
				[]kubeletplugin.NamespacedObject{{UID: "a", NamespacedName: types.NamespacedName{Namespace: "ns", Name: "claim-a"}}})
			if err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
				t.Errorf("unprepare after the checkpoint was edited: %v, want its checksum mismatch", err)
			}
		}},
		{"replaced", func(t *testing.T, path string) {
			data, err := checkpoint.Encode(checkpoint.New())
			if err != nil {
				t.Fatal(err)
			}
			if err := atomicfile.Write(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, p *preparer, path string) {
			if res := p.prepare(t, claim("b", alloc("r", "pci-0000-3b-01-7"))); res.Err != nil {
				t.Fatal(res.Err)
			}
			cp, err := checkpoint.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := cp.Claims["a"]; ok || len(cp.Claims) != 1 {
				t.Errorf("after the checkpoint was replaced by an empty one, a prepare of b saved claims %v, want b alone", slices.Collect(maps.Keys(cp.Claims)))
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n := newTestNode(t)
			p := newPreparer(t, n, t.TempDir())
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				t.Fatal(err)
			}
			if res := p.prepare(t, claim("a", alloc("r", "pci-0000-3b-01-6"))); res.Err != nil {
				t.Fatal(res.Err)
			}
			path := filepath.Join(p.opts.PluginDir, "checkpoint.json")
			tt.change(t, path)
			tt.check(t, p, path)
		})
	}
}

// TestViewsBesideCalls: the device ledger views the driver's checkpoint
// while kubelet's calls change it, among them a claim prepared again for
// one more pod. A view reads the checkpoint the last call saved, which
// the next call's claims share: under -race, a call that changed one of
// them in place is a data race.
func TestViewsBesideCalls(t *testing.T) {
	n := newTestNode(t)
	p := newPreparer(t, n, t.TempDir())
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	beside(t, func(context.Context) error {
		// Encode reads every field of every claim.
		var encodeErr error
		err := p.drv.ViewCheckpoint(func(cp *checkpoint.Checkpoint) { _, encodeErr = checkpoint.Encode(cp) })
		return cmp.Or(err, encodeErr)
	})
	pod := func(uid string) resourceapi.ResourceClaimConsumerReference {
		return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: uid, UID: types.UID(uid)}
	}
	for range 30 {
		c := claim("a", alloc("r", "pci-0000-3b-01-6"))
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{pod("pod-1")}
		if res := p.prepare(t, c); res.Err != nil {
			t.Fatal(res.Err)
		}
		c.Status.ReservedFor = append(c.Status.ReservedFor, pod("pod-2"))
		if res := p.prepare(t, c); res.Err != nil {
			t.Fatal(res.Err)
		}
		var pods []string
		if err := p.drv.ViewCheckpoint(func(cp *checkpoint.Checkpoint) { pods = slices.Clone(cp.Claims["a"].Pods) }); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(pods, []string{"pod-1", "pod-2"}) {
			t.Fatalf("claim prepared again for pod-2: pods %v in the checkpoint, want both", pods)
		}
		if err := p.unprepare(t, "a"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSavedCheckpointIsTheKept: through 200 random calls (a claim
// prepared for a pod, prepared again for another, unprepared; one of
// them with VF settings, saved once more in the middle of its prepare),
// the file each call saves is exactly the encoding of the checkpoint the
// driver keeps: the saves write the claims they kept as they encoded
// them, which holds only while no call changes a kept claim in place.
func TestSavedCheckpointIsTheKept(t *testing.T) {
	n := newTestNode(t)
	dir := t.TempDir()
	p := newPreparer(t, n, dir, vfadmin.NewRecorder(filepath.Join(dir, "calls.jsonl")))
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	claims := map[string]*resourceapi.ResourceClaim{"a": claim("a", alloc("r", "pci-0000-3b-01-6")),
		"b": claim("b", alloc("r", "pci-0000-3b-01-7")), "c": claim("c", alloc("r", "pci-0000-3e-01-6")),
		"v": vfConfig(claim("v", alloc("vfs", netdevVF)), `{"vlan":100}`)}
	uids := slices.Sorted(maps.Keys(claims))
	rng := rand.New(rand.NewPCG(4, 3))
	for step := range 200 {
		uid := uids[rng.IntN(len(uids))]
		c := claims[uid]
		switch prepared := len(c.Status.ReservedFor) > 0; {
		case prepared && rng.IntN(2) == 0:
			if err := p.unprepare(t, uid); err != nil {
				t.Fatal(err)
			}
			c.Status.ReservedFor = nil
		default:
			c = forPod(c, fmt.Sprintf("pod-%d", step))
			claims[uid] = c
			if res := p.prepare(t, c); res.Err != nil {
				t.Fatal(res.Err)
			}
		}
		var want []byte
		if err := p.drv.ViewCheckpoint(func(cp *checkpoint.Checkpoint) { want, _ = checkpoint.Encode(cp) }); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(dra.CheckpointPath("", p.opts.PluginDir))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d (claim %s): the file holds\n%s\nthe kept checkpoint is\n%s", step, uid, got, want)
		}
	}
}
