package cluster

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
)

func TestPlanSys(t *testing.T) {
	dir := &fstest.MapFile{Mode: fs.ModeDir | 0o755}
	virtual := fstest.MapFS{
		"bus/pci/devices/0000:3b:00.0":  {Data: []byte("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0"), Mode: fs.ModeSymlink},
		"class/net/enp59s0f0":           {Data: []byte("../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0/net/enp59s0f0"), Mode: fs.ModeSymlink},
		"devices/pci0000:3a/uevent":     {},
		"devices/system/node/node1":     dir,
		"devices/virtual/net/r3b00.0":   dir,
		"kernel/iommu_groups/8/devices": dir,
	}
	real := fstest.MapFS{
		"bus/pci/devices/0000:00:00.0": dir,
		"class/net/eth0":               dir,
		"class/dmi/id":                 dir,
		"devices/pci0000:00/uevent":    {},
		"devices/system/cpu/online":    {Data: []byte("0-1\n")},
		"devices/virtual/block/zram0":  dir,
		"devices/virtual/net/lo":       dir,
		"fs/cgroup/cpuset":             dir,
		"kernel/mm/hugepages":          dir,
		"kernel/uevent_seqnum":         {Data: []byte("42\n")},
		"module/overlay":               dir,
	}
	want := []sysEntry{
		{Rel: "bus", Type: fs.ModeDir},   // the virtual PCI bus, not the machine's
		{Rel: "class", Type: fs.ModeDir}, // the virtual netdevs, not the host's
		{Rel: "devices", Type: fs.ModeDir, Composite: true},
		{Rel: "devices/pci0000:00", FromReal: true, Type: fs.ModeDir},
		{Rel: "devices/pci0000:3a", Type: fs.ModeDir},
		{Rel: "devices/system", FromReal: true, Type: fs.ModeDir}, // real CPUs and NUMA nodes
		{Rel: "devices/virtual", Type: fs.ModeDir, Composite: true},
		{Rel: "devices/virtual/block", FromReal: true, Type: fs.ModeDir},
		{Rel: "devices/virtual/net", Type: fs.ModeDir},
		{Rel: "fs", FromReal: true, Type: fs.ModeDir}, // real cgroups
		{Rel: "kernel", Type: fs.ModeDir, Composite: true},
		{Rel: "kernel/iommu_groups", Type: fs.ModeDir},
		{Rel: "kernel/mm", FromReal: true, Type: fs.ModeDir},
		{Rel: "kernel/uevent_seqnum", FromReal: true},
		{Rel: "module", FromReal: true, Type: fs.ModeDir},
	}
	got, err := planSys(virtual, real)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("planSys:\n got %+v\nwant %+v", got, want)
	}
}

func TestPlanSysSkipsMissingRealEntries(t *testing.T) {
	virtual := fstest.MapFS{
		"fs/cgroup/cpuset/cpuset.cpus":      {Data: []byte("0-7\n")},
		"devices/system/node/node0/cpulist": {Data: []byte("0-7\n")},
	}
	got, err := planSys(virtual, fstest.MapFS{})
	if err != nil {
		t.Fatal(err)
	}
	// fs is never the tree's, even when the machine lacks it; devices,
	// which the machine lacks, comes whole from the tree.
	want := []sysEntry{{Rel: "devices", Type: fs.ModeDir}}
	if !slices.Equal(got, want) {
		t.Errorf("planSys: got %+v, want %+v", got, want)
	}
}

func TestMountPoints(t *testing.T) {
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	lines := `22 1 254:0 / / rw - ext4 /dev/vda rw
23 22 0:5 / /dev rw - devtmpfs devtmpfs rw
24 23 0:20 / /dev/shm rw - tmpfs tmpfs rw
25 24 0:21 / /dev/shm rw - tmpfs tmpfs rw
26 23 0:22 / /dev/pts rw - devpts devpts rw
27 26 0:23 / /dev/pts/x rw - tmpfs tmpfs rw
28 22 0:24 / /devices rw - tmpfs tmpfs rw
`
	if err := os.WriteFile(mountinfo, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := mountPoints(mountinfo, "/dev")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/dev", "/dev/pts", "/dev/pts/x", "/dev/shm"}; !slices.Equal(got, want) {
		t.Errorf("mountPoints(/dev) = %v, want %v (not /devices)", got, want)
	}
}
