package ctl_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/ctl"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// mainEnv makes the test binary act as hwnetctl, so root tests can run the
// real command inside a virtual node's namespaces.
const mainEnv = "HWNETCTL_TEST_MAIN"

// TestMain is hwnetctl under mainEnv; else it runs the tests, an API
// server reused between them (kubeapi.MainCode).
func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(ctl.Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(kubeapi.MainCode(m))
}

func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = ctl.Main(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// treeNode builds the default virtual node's tree (no root needed).
func treeNode(t *testing.T) *virtualnode.Node {
	t.Helper()
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	return vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), db, false)
}

func inventoryArgs(node *virtualnode.Node, more ...string) []string {
	return append([]string{"inventory", "--sysfs", node.SysRoot(), "--dev", node.DevRoot()}, more...)
}

// TestInventoryMachineOutput: json and yaml carry every PF and VF of the
// node, with the 20-byte addresses of the InfiniBand VFs.
func TestInventoryMachineOutput(t *testing.T) {
	node := treeNode(t)
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := run(t, inventoryArgs(node, "-o", format)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			data := []byte(out)
			if format == "yaml" {
				var err error
				if data, err = yaml.YAMLToJSON(data); err != nil {
					t.Fatal(err)
				}
			}
			var inv discovery.Inventory
			if err := json.Unmarshal(data, &inv); err != nil {
				t.Fatal(err)
			}
			checkInventory(t, node, &inv)
		})
	}
}

func checkInventory(t *testing.T, node *virtualnode.Node, inv *discovery.Inventory) {
	t.Helper()
	seen := map[string]bool{}
	ibVFs := 0
	for _, pf := range inv.PFs {
		seen[pf.Address] = true
		for _, vf := range pf.VFs {
			seen[vf.Address] = true
			if vf.LinkType == hwdb.InfiniBand {
				ibVFs++
				if vf.Netdev == nil || vf.Netdev.AddrLen != 20 || len(vf.Netdev.HardwareAddr) != 59 || vf.RDMA == nil || vf.RDMA.PortGUID == "" {
					t.Errorf("IB VF %s: netdev %+v rdma %+v, want a 20-byte address and GUIDs", vf.Address, vf.Netdev, vf.RDMA)
				}
			}
		}
	}
	for _, n := range inv.NICs {
		seen[n.Address] = true
	}
	for _, f := range node.Devices() {
		if !seen[f.Addr] {
			t.Errorf("%s missing from the output", f.Addr)
		}
	}
	if ibVFs != 4 {
		t.Errorf("%d InfiniBand VFs, want 4", ibVFs)
	}
}

func TestInventoryTable(t *testing.T) {
	node := treeNode(t)
	code, out, errOut := run(t, inventoryArgs(node)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"PF            MODEL       DRIVER     VFS(ENABLED/TOTAL)",
		"0000:3b:00.0  E810-C      ice        8/256",
		"0000:41:00.0  ConnectX-6  mlx5_core  4/127               0     infiniband",
		"  6   0000:3b:01.6  vfio-pci",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "0000:3b:00.0 excluded: SR-IOV PF with 8 VFs enabled") {
		t.Errorf("table does not say why the PF is excluded:\n%s", out)
	}
}

// TestInventoryAdminModels: a model the admin adds names a NIC the
// built-in table does not know.
func TestInventoryAdminModels(t *testing.T) {
	node := treeNode(t)
	models := filepath.Join(t.TempDir(), "models.yaml")
	err := os.WriteFile(models, []byte(`- name: I350-T4
  family: Intel I350
  vendor: "8086"
  pfDevice: "1521"
  vfDevice: "1520"
  pfDrivers: [igb]
  vfDrivers: [igbvf]
  maxVFs: 7
  linkTypes: [ethernet]
  dpdk: vfio-pci
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, inventoryArgs(node, "--hwdb", models, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var inv discovery.Inventory
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.NICs) != 1 || inv.NICs[0].Model != "I350-T4" {
		t.Errorf("NICs %+v, want the mgmt NIC named I350-T4", inv.NICs)
	}
}

// TestUsageErrors: mistakes exit 2 (usage) or 1 (failure) with a message
// that names what was wrong.
func TestUsageErrors(t *testing.T) {
	badModels := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badModels, []byte("- name: X\n  vendor: \"zz\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args     []string
		code     int
		inStderr string
	}{
		{nil, 2, "usage: hwnetctl"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"inventory", "-o", "xml"}, 2, `unknown output format "xml"`},
		{[]string{"inventory", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"inventory", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"inventory", "--sysfs", "/nonexistent"}, 1, `sysfs root "/nonexistent"`},
		{[]string{"inventory", "--hwdb", "/nonexistent.yaml"}, 1, "--hwdb: open /nonexistent.yaml"},
		{[]string{"inventory", "--hwdb", badModels}, 1, `"zz"`},
		{[]string{"virtual-node"}, 2, "want a subcommand"},
		{[]string{"virtual-node", "explode"}, 2, `unknown subcommand "explode"`},
		{[]string{"virtual-node", "exec"}, 2, "want a command after the flags"},
		{[]string{"virtual-node", "destroy", "--dir", "/nonexistent"}, 1, "open virtual node"},
		{[]string{"virtual-node", "create", "--spec", "a.yaml", "--capture", "b.json"}, 2, "--spec and --capture: give one"},
		{[]string{"virtual-node", "create", "--capture", "/nonexistent.json"}, 1, "--capture: "},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
			t.Errorf("hwnetctl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.inStderr)
		}
	}
}

// TestVirtualNodeRoot runs the operator's flow with the real command in
// its own processes: create, inventory inside the node, destroy; and
// checks that destroy leaves no network namespace behind.
func TestVirtualNodeRoot(t *testing.T) {
	vnodetest.RequireRoot(t)
	dir := filepath.Join(t.TempDir(), "node")
	self := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
		cmd.Env = append(os.Environ(), mainEnv+"=1")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("hwnetctl %q: %v: %s", args, err, err.(*exec.ExitError).Stderr)
		}
		return string(out)
	}
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	if err := os.WriteFile(spec, []byte("name: ctl-root\npfs:\n  - model: ConnectX-6\n    vfs: 2\n    linkType: infiniband\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out := self("virtual-node", "create", "--spec", spec, "--dir", dir); !strings.Contains(out, "netns hwnet-vn-ctl-root") {
		t.Errorf("create said %q", out)
	}
	out := self("virtual-node", "exec", "--dir", dir, "--", os.Args[0], "inventory", "-o", "json")
	var inv discovery.Inventory
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(inv.PFs) != 1 || len(inv.PFs[0].VFs) != 2 || inv.PFs[0].VFs[0].Netdev == nil || inv.PFs[0].VFs[0].Netdev.StateFrom != "netlink" {
		t.Errorf("inventory inside the node: %s", out)
	}
	self("virtual-node", "destroy", "--dir", dir)
	if _, err := os.Stat("/run/netns/hwnet-vn-ctl-root"); !os.IsNotExist(err) {
		t.Errorf("netns still there after destroy: %v", err)
	}
}

// TestVirtualNodeFromCapture: a contributed capture becomes a virtual
// node with one command, which hwnetctl inventory reads as the capture's
// machine: a VM's virtio-net NIC with its netdev below virtio0.
func TestVirtualNodeFromCapture(t *testing.T) {
	dir := filepath.Join(vnodetest.Dir(t), "captured")
	code, out, errOut := run(t, "virtual-node", "create", "--no-links", "--name", "kvm", "--dir", dir,
		"--capture", "../node/discovery/testdata/captures/kvm-virtio-net.json")
	if code != 0 || !strings.Contains(out, `virtual node "kvm": 1 network functions`) {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	t.Cleanup(func() { run(t, "virtual-node", "destroy", "--dir", dir) })
	code, out, errOut = run(t, "inventory", "--sysfs", filepath.Join(dir, "sys"), "--dev", filepath.Join(dir, "dev"), "-o", "json")
	var inv discovery.Inventory
	if err := json.Unmarshal([]byte(out), &inv); code != 0 || err != nil {
		t.Fatalf("inventory: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if len(inv.NICs) != 1 || inv.NICs[0].Address != "0000:00:03.0" || inv.NICs[0].Netdev == nil || inv.NICs[0].Netdev.Name != "eth0" {
		t.Errorf("inventory of the captured node: %s", out)
	}
}
