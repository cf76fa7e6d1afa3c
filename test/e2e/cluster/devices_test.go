package cluster

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

func TestCharDevice(t *testing.T) {
	tests := []struct {
		rel          string
		major, minor uint32
		wantErr      bool
	}{
		{rel: "vfio/vfio", major: 10, minor: 196},
		{rel: "vfio/8", major: vfioGroupMajor, minor: 8},
		{rel: "vfio/noiommu-3", major: vfioGroupMajor, minor: 3},
		{rel: "infiniband/uverbs2", major: 231, minor: 194},
		{rel: "infiniband/umad1", major: 231, minor: 1},
		{rel: "infiniband/issm1", major: 231, minor: 65},
		{rel: "infiniband/rdma_cm", major: 10, minor: rdmaCMMinor},
		{rel: "uio0", major: uioMajor, minor: 0},
		{rel: "vfio/08", wantErr: true},
		{rel: "vfio/-1", wantErr: true},
		{rel: "vfio/65536", wantErr: true},
		{rel: "infiniband/uverbs", wantErr: true},
		{rel: "net/tun", wantErr: true},
		{rel: "vfio/8/x", wantErr: true},
	}
	for _, tt := range tests {
		major, minor, err := charDevice(tt.rel)
		if (err != nil) != tt.wantErr {
			t.Errorf("charDevice(%q): error %v, want error %v", tt.rel, err, tt.wantErr)
			continue
		}
		if major != tt.major || minor != tt.minor {
			t.Errorf("charDevice(%q) = %d:%d, want %d:%d", tt.rel, major, minor, tt.major, tt.minor)
		}
	}
}

func FuzzCharDevice(f *testing.F) {
	for _, seed := range []string{"vfio/vfio", "vfio/8", "vfio/noiommu-0", "infiniband/uverbs0", "uio3", "", "vfio/", "infiniband/issm99999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		major, minor, err := charDevice(rel)
		if err != nil {
			return
		}
		if major == 0 || minor >= 1<<20 {
			t.Errorf("charDevice(%q) = %d:%d: not a valid device number", rel, major, minor)
		}
	})
}

// TestSyncDevices makes the character devices for a real virtual node's
// device tree, then follows a VF moving off vfio-pci.
func TestSyncDevices(t *testing.T) {
	vnodetest.RequireRoot(t) // mknod
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	dst := t.TempDir()
	if err := syncDevices(node.DevRoot(), dst); err != nil {
		t.Fatal(err)
	}
	var vfio virtualnode.Function
	for _, f := range node.Devices() {
		if f.Driver == "vfio-pci" {
			vfio = f
			break
		}
	}
	group := filepath.Join(dst, "vfio", strconv.Itoa(vfio.IOMMUGroup))
	assertCharDevice(t, group, vfioGroupMajor, uint32(vfio.IOMMUGroup))
	assertCharDevice(t, filepath.Join(dst, "infiniband", "uverbs0"), 231, 192)

	if err := node.BindDriver(t.Context(), vfio.Addr, "iavf"); err != nil {
		t.Fatal(err)
	}
	if err := syncDevices(node.DevRoot(), dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(group); !os.IsNotExist(err) {
		t.Errorf("%s still there after its VF left vfio-pci (%v)", group, err)
	}
}

func assertCharDevice(t *testing.T, path string, major, minor uint32) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != unix.Mkdev(major, minor) {
		t.Errorf("%s: mode %o rdev %d:%d, want a character device %d:%d", path, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev), major, minor)
	}
}
