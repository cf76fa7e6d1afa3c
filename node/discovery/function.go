package discovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/hwdb"
)

// PCI classes discovery cares about (class attribute >> 8).
const (
	classNetwork    = 0x02
	classInfiniBand = 0x0207
	classEthernet   = 0x0200
)

// scanned is what one function's sysfs directory says, before VFs are
// joined to their PFs.
type scanned struct {
	fn        Function
	class     uint32
	sriov     *SRIOV
	virtfns   []virtfn
	hasPhysfn bool
	dir       string
	// sfs are a PF's scalable functions.
	sfs []SF
}

// virtfn is one virtfnN link of a PF.
type virtfn struct {
	index   int
	address string
}

// functionScanner reads one PCI function's directory at a time.
type functionScanner struct {
	opts    Options
	links   *pendingLinks
	ib      *devInfiniband
	netdevs *netdevIndex
	aux     *auxIndex
	r       attrReader
}

// scan returns nil for functions that are neither network controllers nor
// part of SR-IOV.
func (s *functionScanner) scan(name string) *scanned {
	dir := filepath.Join(s.opts.SysfsRoot, pciDevicesDir, name)
	fd, err := openat(unix.AT_FDCWD, dir, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return s.unreadable(name, dir, err)
	}
	defer unix.Close(fd)
	s.r.dirfd = fd
	entries, err := s.r.listDevice(fd, dir)
	if err != nil {
		return s.unreadable(name, dir, err)
	}
	sc := &scanned{dir: dir, fn: Function{Address: name, NUMANode: -1}, hasPhysfn: entries.physfn}
	// A function whose class cannot be read stays, with the problem: it
	// may be a NIC, and a NIC is never dropped silently. A function with a
	// netdev or an RDMA device is a NIC whatever its class (ib_qib HCAs
	// are class 0x0c06, InfiniBand serial bus).
	nic := entries.sriov || sc.hasPhysfn || entries.net || entries.infiniband
	if s.readIDs(sc) && sc.class>>16 != classNetwork && !nic {
		return nil
	}
	if _, err := parsePCIAddress(name); err != nil {
		sc.problem(err)
	}
	sc.fn.Class = fmt.Sprintf("0x%06x", sc.class)
	s.readIdentity(sc)
	if entries.sriov {
		s.readSRIOV(sc, entries.virtfns)
	}
	s.readNetdev(sc, entries.net)
	if entries.infiniband {
		s.readRDMA(sc, entries)
	}
	if entries.sriov {
		s.readSFs(sc, fd)
	}
	if entries.uio {
		s.findUIODevice(sc)
	}
	return sc
}

func (s *functionScanner) unreadable(name, dir string, err error) *scanned {
	sc := &scanned{dir: dir, fn: Function{Address: name, NUMANode: -1}}
	sc.problem(fmt.Errorf("reading %s: %w", dir, err))
	return sc
}

func (sc *scanned) problem(err error) {
	sc.fn.Problems = append(sc.fn.Problems, err.Error())
}

// readIDs sets class, vendor and device from uevent, which the kernel
// always writes, or from the class, vendor and device attributes when
// uevent does not say. It reports whether the class is known.
func (s *functionScanner) readIDs(sc *scanned) bool {
	v, err := s.r.read("uevent")
	if err == nil {
		var u pciUevent
		if u, err = parsePCIUevent(v); err == nil {
			sc.class = u.class
			sc.fn.Vendor = parseID(sc, "uevent PCI_ID vendor", u.vendor)
			sc.fn.Device = parseID(sc, "uevent PCI_ID device", u.device)
			return true
		}
		sc.problem(err)
	}
	v, err = s.r.read("class")
	if err == nil {
		sc.class, err = parseClass(v)
	}
	if err != nil {
		sc.problem(err)
		return false
	}
	sc.fn.Vendor = s.readID(sc, "vendor")
	sc.fn.Device = s.readID(sc, "device")
	return true
}

// readIdentity reads NUMA node, driver and IOMMU group.
func (s *functionScanner) readIdentity(sc *scanned) {
	if v, err := s.r.read("numa_node"); err == nil {
		n, err := parseNUMANode(v)
		sc.fn.NUMANode = n
		if err != nil {
			sc.problem(err)
		}
	} else if !notExist(err) {
		sc.problem(err)
	}
	if drv, err := s.r.linkBase("driver"); err == nil {
		sc.fn.Driver = drv
	} else if !notExist(err) {
		sc.problem(err)
	}
	if g, err := s.r.linkBase("iommu_group"); err == nil {
		sc.fn.IOMMUGroup = g
	} else if !notExist(err) {
		sc.problem(err)
	}
	if sc.fn.Driver == "vfio-pci" {
		s.findVFIODevice(sc)
	}
}

func (s *functionScanner) readID(sc *scanned, attr string) hwdb.PCIID {
	v, err := s.r.read(attr)
	if err != nil {
		sc.problem(err)
		return 0
	}
	return parseID(sc, attr, v)
}

func parseID(sc *scanned, field, v string) hwdb.PCIID {
	id, err := hwdb.ParsePCIID(v)
	if err != nil {
		sc.problem(fmt.Errorf("%s: %w", field, err))
	}
	return id
}

// findVFIODevice names the VFIO group device a DPDK application opens.
func (s *functionScanner) findVFIODevice(sc *scanned) {
	if sc.fn.IOMMUGroup == "" {
		sc.problem(fmt.Errorf("bound to vfio-pci but has no iommu_group"))
		return
	}
	path := filepath.Join(s.opts.DevRoot, "vfio", sc.fn.IOMMUGroup)
	if !exists(path) {
		noiommu := filepath.Join(s.opts.DevRoot, "vfio", "noiommu-"+sc.fn.IOMMUGroup)
		if !exists(noiommu) {
			sc.problem(fmt.Errorf("bound to vfio-pci but %s does not exist", path))
			return
		}
		path = noiommu
	}
	sc.fn.VFIODevice = path
}

// findUIODevice names the /dev/uioN through which a UIO driver
// (uio_pci_generic, igb_uio) hands the function to user space; the kernel
// names the node after the function's uio/uioN class device.
func (s *functionScanner) findUIODevice(sc *scanned) {
	names, err := s.r.dirNames("uio")
	if err == nil && len(names) == 0 {
		err = errors.New("uio: the directory lists no UIO device")
	}
	if err != nil {
		sc.problem(err)
		return
	}
	slices.Sort(names)
	path := filepath.Join(s.opts.DevRoot, names[0])
	if !exists(path) {
		sc.problem(fmt.Errorf("bound to %s but %s does not exist", sc.fn.Driver, path))
		return
	}
	sc.fn.UIODevice = path
}

// readSRIOV reads a PF's SR-IOV attributes and its virtfnN links.
func (s *functionScanner) readSRIOV(sc *scanned, virtfns []string) {
	sr := &SRIOV{}
	for _, a := range []struct {
		name string
		dst  *int
	}{{"sriov_totalvfs", &sr.TotalVFs}, {"sriov_numvfs", &sr.NumVFs}, {"sriov_offset", &sr.Offset}, {"sriov_stride", &sr.Stride}} {
		v, err := s.r.readInt(a.name)
		if err != nil && !notExist(err) {
			sc.problem(err)
		}
		*a.dst = v
	}
	if v, err := s.r.read("sriov_vf_device"); err == nil {
		if sr.VFDevice, err = hwdb.ParsePCIID(v); err != nil {
			sc.problem(fmt.Errorf("sriov_vf_device: %w", err))
		}
	}
	sc.sriov = sr
	for _, e := range virtfns {
		idx, ok := parseVirtfn(e)
		if !ok {
			continue
		}
		target, err := s.r.linkBase(e)
		if err != nil {
			sc.problem(err)
			continue
		}
		sc.virtfns = append(sc.virtfns, virtfn{index: idx, address: target})
	}
	slices.SortFunc(sc.virtfns, func(a, b virtfn) int { return a.index - b.index })
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
