package discovery_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// Addresses in the default virtual node.
const (
	pf0      = "0000:3b:00.0"
	pf0vf3   = "0000:3b:01.3"
	pf0vf6   = "0000:3b:01.6" // on vfio-pci
	pf1      = "0000:3e:00.0"
	pf1vf0   = "0000:3e:01.0"
	ibPF     = "0000:41:00.0"
	ibVF1    = "0000:41:01.1"
	mgmtNIC  = "0000:43:00.0"
	pf0ifvf3 = "enp59s0f0v3"
)

// TestDiscoverMalformedTrees breaks one thing at a time in a generated
// tree: discovery must keep the function, say what is wrong on it, and go
// on with the rest.
func TestDiscoverMalformedTrees(t *testing.T) {
	for _, tc := range []struct {
		name    string
		breakIt func(t *testing.T, sys string)
		addr    string
		problem string // substring of one of the function's problems
		check   func(t *testing.T, inv *discovery.Inventory)
	}{{
		name:    "garbage in numa_node",
		breakIt: func(t *testing.T, sys string) { writeFile(t, dev(sys, pf0vf3, "numa_node"), "banana\n") },
		addr:    pf0vf3, problem: `numa_node: "banana" is not a decimal number`,
		check: func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.NUMANode != -1 {
				t.Errorf("NUMA node %d, want -1 (unknown)", f.NUMANode)
			}
		},
	}, {
		name: "no uevent and a missing vendor",
		breakIt: func(t *testing.T, sys string) {
			remove(t, dev(sys, pf1vf0, "uevent"))
			remove(t, dev(sys, pf1vf0, "vendor"))
		},
		addr: pf1vf0, problem: "vendor: no such file or directory",
		check: func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf1vf0); f.Device != 0x1889 || f.Class != "0x020000" {
				t.Errorf("device %s class %s, want 1889 and 0x020000 from the attribute files", f.Device, f.Class)
			}
		},
	}, {
		name: "no uevent and a garbage class",
		breakIt: func(t *testing.T, sys string) {
			remove(t, dev(sys, mgmtNIC, "uevent"))
			writeFile(t, dev(sys, mgmtNIC, "class"), "network\n")
		},
		addr: mgmtNIC, problem: `class: "network" is not a 24-bit hex PCI class`,
	}, {
		name: "garbage device ID in uevent",
		breakIt: func(t *testing.T, sys string) {
			editUevent(t, dev(sys, pf0vf3, "uevent"), "PCI_ID=8086:1889", "PCI_ID=8086:18")
		},
		addr: pf0vf3, problem: `uevent PCI_ID device:`,
	}, {
		name:    "uevent without PCI_ID",
		breakIt: func(t *testing.T, sys string) { editUevent(t, dev(sys, pf0vf3, "uevent"), "PCI_ID=8086:1889", "") },
		addr:    pf0vf3, problem: "uevent: PCI_CLASS or PCI_ID missing",
		check: func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.Device != 0x1889 {
				t.Errorf("device %s, want 1889 from the device attribute", f.Device)
			}
		},
	}, {
		name: "garbage hardware address",
		breakIt: func(t *testing.T, sys string) {
			writeFile(t, dev(sys, pf0vf3, "net", pf0ifvf3, "address"), "not-a-mac\n")
		},
		addr: pf0vf3, problem: `address: "not-a-mac" is not a 6- or 20-byte hardware address`,
	}, {
		name:    "garbage node GUID",
		breakIt: func(t *testing.T, sys string) { writeFile(t, rdmaFile(t, sys, ibVF1, "node_guid"), "guid\n") },
		addr:    ibVF1, problem: `node_guid: "guid" is not 4 colon-separated groups of 4 hex digits`,
	}, {
		name: "RDMA VF without its umad node",
		breakIt: func(t *testing.T, sys string) {
			remove(t, filepath.Join(devRootOf(sys), "infiniband", classDevice(t, sys, ibVF1, "infiniband_mad", "umad")))
		},
		addr: ibVF1, problem: "does not exist",
		check: func(t *testing.T, inv *discovery.Inventory) {
			checkCharDevices(t, inv, ibVF1, "uverbs", "issm", "rdma_cm")
		},
	}, {
		name:    "no rdma_cm, as without the rdma_ucm module",
		breakIt: func(t *testing.T, sys string) { remove(t, filepath.Join(devRootOf(sys), "infiniband", "rdma_cm")) },
		addr:    ibVF1,
		check: func(t *testing.T, inv *discovery.Inventory) {
			checkCharDevices(t, inv, ibVF1, "uverbs", "umad", "issm")
			checkNoProblems(t, inv, ibVF1)
		},
	}, {
		name:    "RDMA VF without MAD devices",
		breakIt: func(t *testing.T, sys string) { removeAll(t, dev(sys, ibVF1, "infiniband_mad")) },
		addr:    ibVF1,
		check: func(t *testing.T, inv *discovery.Inventory) {
			checkCharDevices(t, inv, ibVF1, "uverbs", "rdma_cm")
			checkNoProblems(t, inv, ibVF1)
		},
	}, {
		name:    "garbage sriov_numvfs",
		breakIt: func(t *testing.T, sys string) { writeFile(t, dev(sys, pf1, "sriov_numvfs"), "eight\n") },
		addr:    pf1, problem: `sriov_numvfs: "eight" is not a decimal number`,
	}, {
		name: "dangling iommu_group link",
		breakIt: func(t *testing.T, sys string) {
			relink(t, dev(sys, pf0vf3, "iommu_group"), "../../../kernel/iommu_groups/999")
		},
		addr: pf0vf3,
		check: func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); f.IOMMUGroup != "999" {
				t.Errorf("IOMMU group %q, want the link's target 999", f.IOMMUGroup)
			}
		},
	}, {
		name:    "vfio-pci VF without its /dev/vfio group",
		breakIt: func(t *testing.T, sys string) { removeVFIODevice(t, sys, pf0vf6) },
		addr:    pf0vf6, problem: "bound to vfio-pci but",
	}, {
		name:    "VF whose PF vanished",
		breakIt: func(t *testing.T, sys string) { removeFunction(t, sys, pf0) },
		addr:    pf0vf3, problem: "VF of PF 0000:3b:00.0, which is not present or does not list it",
		check: func(t *testing.T, inv *discovery.Inventory) {
			if len(inv.PFs) != 2 || len(inv.NICs) != 9 {
				t.Errorf("got %d PFs and %d NICs, want 2 PFs and the mgmt NIC plus 8 orphaned VFs", len(inv.PFs), len(inv.NICs))
			}
		},
	}, {
		name:    "virtfn link to a vanished VF",
		breakIt: func(t *testing.T, sys string) { removeFunction(t, sys, pf0vf3) },
		addr:    pf0, problem: "virtfn3 points to 0000:3b:01.3, which is not a PCI function",
	}, {
		name:    "function directory gone behind its bus link",
		breakIt: func(t *testing.T, sys string) { removeAll(t, realDir(t, sys, pf1vf0)) },
		addr:    pf1vf0, problem: "no such file or directory",
	}, {
		name:    "driver unbound",
		breakIt: func(t *testing.T, sys string) { remove(t, dev(sys, pf0vf3, "driver")) },
		addr:    pf0vf3,
		check: func(t *testing.T, inv *discovery.Inventory) {
			if f, _ := inv.Function(pf0vf3); len(f.Excluded) != 1 || f.Excluded[0] != "no driver is bound" {
				t.Errorf("excluded %q, want [no driver is bound]", f.Excluded)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			db := vnodetest.OpenDB(t)
			node := buildTree(t, db, virtualnode.DefaultSpec())
			tc.breakIt(t, node.SysRoot())
			inv := discover(t, db, node, discovery.Options{})
			f, ok := inv.Function(tc.addr)
			if !ok {
				t.Fatalf("%s is missing from the inventory", tc.addr)
			}
			if tc.problem != "" && !hasProblem(f, tc.problem) {
				t.Errorf("%s problems %q, want one containing %q", tc.addr, f.Problems, tc.problem)
			}
			if tc.check != nil {
				tc.check(t, inv)
			}
		})
	}
}

func hasProblem(f *discovery.Function, want string) bool {
	for _, p := range f.Problems {
		if strings.Contains(p, want) {
			return true
		}
	}
	return false
}

func dev(sys, addr string, elem ...string) string {
	return filepath.Join(append([]string{sys, "bus/pci/devices", addr}, elem...)...)
}

func realDir(t *testing.T, sys, addr string) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(dev(sys, addr))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rdmaFile finds a file of the function's single RDMA device.
func rdmaFile(t *testing.T, sys, addr, name string) string {
	t.Helper()
	m, err := filepath.Glob(dev(sys, addr, "infiniband", "*", name))
	if err != nil || len(m) != 1 {
		t.Fatalf("rdma %s of %s: %v %v", name, addr, m, err)
	}
	return m[0]
}

func removeVFIODevice(t *testing.T, sys, addr string) {
	t.Helper()
	group, err := os.Readlink(dev(sys, addr, "iommu_group"))
	if err != nil {
		t.Fatal(err)
	}
	remove(t, filepath.Join(devRootOf(sys), "vfio", filepath.Base(group)))
}

// devRootOf is the dev root next to a virtual node's sys root.
func devRootOf(sys string) string { return filepath.Join(filepath.Dir(sys), "dev") }

// classDevice names the function's one class device under class whose
// name starts with prefix, such as umad3.
func classDevice(t *testing.T, sys, addr, class, prefix string) string {
	t.Helper()
	m, err := filepath.Glob(dev(sys, addr, class, prefix+"*"))
	if err != nil || len(m) != 1 {
		t.Fatalf("%s %s* of %s: %v %v", class, prefix, addr, m, err)
	}
	return filepath.Base(m[0])
}

// checkCharDevices checks that the function's RDMA character devices are
// of these kinds, in this order.
func checkCharDevices(t *testing.T, inv *discovery.Inventory, addr string, kinds ...string) {
	t.Helper()
	f, _ := inv.Function(addr)
	if f.RDMA == nil {
		t.Fatalf("%s has no RDMA device", addr)
	}
	var got []string
	for _, p := range f.RDMA.CharDevices {
		got = append(got, strings.TrimRight(filepath.Base(p), "0123456789"))
	}
	if !slices.Equal(got, kinds) {
		t.Errorf("%s: rdma char devices %q, want %v", addr, f.RDMA.CharDevices, kinds)
	}
}

func checkNoProblems(t *testing.T, inv *discovery.Inventory, addr string) {
	t.Helper()
	if f, _ := inv.Function(addr); len(f.Problems) > 0 {
		t.Errorf("%s: problems %q, want none", addr, f.Problems)
	}
}

// removeFunction hot-unplugs a function the crude way: its directory and
// its bus link go, every link to it stays dangling.
func removeFunction(t *testing.T, sys, addr string) {
	t.Helper()
	removeAll(t, realDir(t, sys, addr))
	remove(t, dev(sys, addr))
}

func editUevent(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	writeFile(t, path, strings.Replace(string(data), old, new, 1))
}

func relink(t *testing.T, link, target string) {
	t.Helper()
	remove(t, link)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func removeAll(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}
