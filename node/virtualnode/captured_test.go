package virtualnode_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestBuildCapturedRefuses: what a virtual node cannot draw is refused
// with the function and the reason, and nothing is left behind.
// node/capture's tests draw whole captures.
func TestBuildCapturedRefuses(t *testing.T) {
	sys := t.TempDir()
	dev := filepath.Join(sys, "devices/pci0001:00/0001:00:03.0")
	if err := os.MkdirAll(dev, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sys, "bus/pci/devices"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../devices/pci0001:00/0001:00:03.0", filepath.Join(sys, "bus/pci/devices/0001:00:03.0")); err != nil {
		t.Fatal(err)
	}
	nic := func(addr, class string) *discovery.Inventory {
		return &discovery.Inventory{NICs: []discovery.Function{{Address: addr, Vendor: 0x1af4, Device: 0x1041, Class: class, NUMANode: -1}}}
	}
	tests := []struct {
		name, node string
		inv        *discovery.Inventory
		want       string
	}{
		{"another PCI domain", "captured", nic("0001:00:03.0", "0x020000"), `function "0001:00:03.0": the virtual node draws PCI domain 0000 only`},
		{"a function the tree does not have", "captured", nic("0000:00:04.0", "0x020000"), "function 0000:00:04.0: lstat"},
		{"a bad node name", "Captured", nic("0000:00:04.0", "0x020000"), `field name: "Captured" is not`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(vnodetest.Dir(t), "vn")
			_, _, err := virtualnode.BuildCaptured(context.Background(), virtualnode.Captured{Name: tt.node, Sys: sys, Inventory: tt.inv},
				virtualnode.Options{Dir: dir})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s is left behind: %v", dir, err)
			}
		})
	}
}
