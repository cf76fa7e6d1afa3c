package virtualnode_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestMirrorDevices makes the character devices for a real virtual node's
// device tree, then follows a VF moving off vfio-pci.
func TestMirrorDevices(t *testing.T) {
	vnodetest.RequireRoot(t) // mknod
	node := vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), false)
	dst := t.TempDir()
	if err := node.MirrorDevices(dst); err != nil {
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
	assertCharDevice(t, group, 511, uint32(vfio.IOMMUGroup)) // a major no driver here has
	assertCharDevice(t, filepath.Join(dst, "infiniband", "uverbs0"), 231, 192)

	if err := node.BindDriver(t.Context(), vfio.Addr, "iavf"); err != nil {
		t.Fatal(err)
	}
	if err := node.MirrorDevices(dst); err != nil {
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

// TestEnactWritesInto: a VF the kernel emulation binds to vfio-pci gets
// its group's character device in the mirrored /dev as the bind shows,
// and loses it when bound back, as devtmpfs does.
func TestEnactWritesInto(t *testing.T) {
	vnodetest.RequireRoot(t) // mknod
	n := build(t, virtualnode.DefaultSpec(), false)
	dev := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done, ready := make(chan error, 1), make(chan struct{})
	go func() { done <- n.EnactWritesInto(ctx, slog.New(slog.DiscardHandler), dev, func() { close(ready) }) }()
	t.Cleanup(func() { cancel(); <-done })
	<-ready
	f, _ := n.Device(e810VF0)
	group := filepath.Join(dev, "vfio", strconv.Itoa(f.IOMMUGroup))
	write := func(rel, v string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(n.SysRoot(), rel), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	isChar := func() bool {
		var st unix.Stat_t
		return unix.Stat(group, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR
	}
	write("bus/pci/devices/"+e810VF0+"/driver/unbind", e810VF0)
	waitFor(t, "VF 0 unbound", func() bool { f, _ := n.Device(e810VF0); return f.Driver == "" })
	write("bus/pci/devices/"+e810VF0+"/driver_override", "vfio-pci")
	write("bus/pci/drivers_probe", e810VF0)
	waitFor(t, group+" a character device", isChar)
	write("bus/pci/devices/"+e810VF0+"/driver/unbind", e810VF0)
	waitFor(t, group+" gone", func() bool { _, err := os.Lstat(group); return os.IsNotExist(err) })
}
