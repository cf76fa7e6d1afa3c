package virtualnode_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"

	"github.com/jaypipes/ghw"
	"github.com/jaypipes/ghw/pkg/pci"
)

// pciIDs names the vendors, devices and classes of the default node, in
// pci.ids format, so that ghw has a database to read; the host has none.
const pciIDs = `8086  Intel Corporation
	1521  I350 Gigabit Network Connection
	1592  Ethernet Controller E810-C for QSFP
	1889  Ethernet Adaptive Virtual Function
	2030  Sky Lake-E PCI Express Root Port A
15b3  Mellanox Technologies
	101b  MT28908 Family [ConnectX-6]
	101c  MT28908 Family [ConnectX-6 Virtual Function]
C 02  Network controller
	00  Ethernet controller
	07  Infiniband controller
C 06  Bridge
	04  PCI bridge
`

var productNames = map[string]string{
	"8086:1521": "I350 Gigabit Network Connection",
	"8086:1592": "Ethernet Controller E810-C for QSFP",
	"8086:1889": "Ethernet Adaptive Virtual Function",
	"15b3:101b": "MT28908 Family [ConnectX-6]",
	"15b3:101c": "MT28908 Family [ConnectX-6 Virtual Function]",
}

// TestGHW runs ghw inside the node, as an unmodified tool, and checks that
// it finds every device with its IDs, names, driver, NUMA node and group.
func TestGHW(t *testing.T) {
	vnodetest.RequireRoot(t)
	n := build(t, rootSpec(t), true)
	ids := filepath.Join(t.TempDir(), "pci.ids")
	if err := os.WriteFile(ids, []byte(pciIDs), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PCIDB_PATH", ids)
	t.Setenv("GHW_DISABLE_WARNINGS", "1")
	var info *pci.Info
	err := n.Run(context.Background(), func() (err error) {
		info, err = ghw.PCI()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]*pci.Device{}
	for _, d := range info.Devices {
		found[d.Address] = d
	}
	for _, f := range n.Devices() {
		d := found[f.Addr]
		if d == nil {
			t.Errorf("ghw does not see %s", f.Addr)
			continue
		}
		checkGHWDevice(t, f, d)
	}
}

func checkGHWDevice(t *testing.T, f virtualnode.Function, d *pci.Device) {
	t.Helper()
	id := f.Vendor.String() + ":" + f.Device.String()
	if got := d.Vendor.ID + ":" + d.Product.ID; got != id || d.Product.Name != productNames[id] {
		t.Errorf("%s: ghw sees %s %q, want %s %q", f.Addr, got, d.Product.Name, id, productNames[id])
	}
	if d.Driver != f.Driver || d.IOMMUGroup != strconv.Itoa(f.IOMMUGroup) {
		t.Errorf("%s: ghw sees driver %q group %q, want %q %d", f.Addr, d.Driver, d.IOMMUGroup, f.Driver, f.IOMMUGroup)
	}
	if d.Node == nil || d.Node.ID != f.NUMA {
		t.Errorf("%s: ghw sees NUMA node %+v, want %d", f.Addr, d.Node, f.NUMA)
	}
}
