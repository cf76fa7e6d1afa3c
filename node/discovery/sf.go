package discovery

import (
	"cmp"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// auxDevicesDir lists every auxiliary device, each a link to its directory.
const auxDevicesDir = "bus/auxiliary/devices"

// auxIndex maps each PCI function to the auxiliary devices whose directory
// is its child: a PF's SFs (mlx5_core.sf.N) and its own auxiliary devices
// (mlx5_core.eth.N), not those below an SF (its mlx5_core.eth.N). It is
// built once a Discover, by the first PF, from one listing of
// bus/auxiliary/devices and one readlink a device; a node without the
// auxiliary bus has none.
type auxIndex struct {
	sysfsRoot string
	once      sync.Once
	byParent  map[string][]string
	// problems say what of the listing could not be read; read them only
	// after the scan.
	problems []string
}

// children returns the names of the auxiliary devices below the function.
func (x *auxIndex) children(address string) []string {
	x.once.Do(x.build)
	return x.byParent[address]
}

func (x *auxIndex) listProblems() []string { return x.problems }

func (x *auxIndex) build() {
	x.byParent = map[string][]string{}
	r := cwdReader()
	dir := filepath.Join(x.sysfsRoot, auxDevicesDir)
	names, err := r.dirNames(dir)
	if err != nil {
		if !notExist(err) {
			x.problems = append(x.problems, fmt.Sprintf("listing auxiliary devices: %v; no scalable functions are listed", err))
		}
		return
	}
	for _, name := range names {
		link := filepath.Join(dir, name)
		n, err := unix.Readlinkat(unix.AT_FDCWD, link, r.buf[:])
		if err != nil {
			x.problems = append(x.problems, fmt.Sprintf("auxiliary device %s: %v", link, err))
			continue
		}
		parent := path.Base(path.Dir(string(r.buf[:n])))
		if _, err := parsePCIAddress(parent); err == nil {
			x.byParent[parent] = append(x.byParent[parent], name)
		}
	}
}

// readSFs reads the PF's scalable functions, in sfnum order: the auxiliary
// devices below it that have an sfnum. It leaves the reader at the PF's
// directory, pfFD.
func (s *functionScanner) readSFs(sc *scanned, pfFD int) {
	for _, name := range s.aux.children(sc.fn.Address) {
		if sf, ok := s.readSF(sc, pfFD, name); ok {
			sc.sfs = append(sc.sfs, sf)
		}
	}
	s.r.dirfd = pfFD
	slices.SortFunc(sc.sfs, compareSFs)
}

// compareSFs orders SFs by sfnum, those whose sfnum is unreadable (-1)
// last, and by name.
func compareSFs(a, b SF) int {
	unknown := func(sf SF) int {
		if sf.SFNum < 0 {
			return 1
		}
		return 0
	}
	return cmp.Or(cmp.Compare(unknown(a), unknown(b)), cmp.Compare(a.SFNum, b.SFNum), cmp.Compare(a.Name, b.Name))
}

// readSF reads one auxiliary device below the PF; ok is false for one
// without an sfnum, which is no SF. Its netdev and RDMA device are read
// as a function's are, its problems kept on it.
func (s *functionScanner) readSF(pf *scanned, pfFD int, name string) (sf SF, ok bool) {
	dir := filepath.Join(pf.dir, name)
	fd, err := openat(pfFD, name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if !notExist(err) {
			pf.problem(fmt.Errorf("auxiliary device %s: %w", dir, err))
		}
		return SF{}, false
	}
	defer unix.Close(fd)
	s.r.dirfd = fd
	num, err := s.r.read("sfnum")
	if notExist(err) {
		return SF{}, false
	}
	sub := &scanned{dir: dir, fn: Function{NUMANode: pf.fn.NUMANode}}
	sf = SF{Name: name, AuxType: auxType(name), SFNum: -1, NUMANode: pf.fn.NUMANode}
	if err == nil {
		sf.SFNum, err = parseSFNum(num)
	}
	if err != nil {
		sub.problem(fmt.Errorf("%s/%w", dir, err))
	}
	s.readSFDevices(sub, fd, &sf)
	return sf, true
}

// readSFDevices reads what the SF's drivers made: its driver link, its
// netdev and its RDMA device.
func (s *functionScanner) readSFDevices(sub *scanned, fd int, sf *SF) {
	if drv, err := s.r.linkBase("driver"); err == nil {
		sf.Driver = drv
	} else if !notExist(err) {
		sub.problem(err)
	}
	entries, err := s.r.listDevice(fd, sub.dir)
	if err != nil {
		sub.problem(err)
	}
	if entries.net {
		s.readNetdev(sub, true)
	}
	if entries.infiniband {
		s.readRDMA(sub, entries)
	}
	sf.Netdev, sf.RDMA, sf.Problems = sub.fn.Netdev, sub.fn.RDMA, sub.fn.Problems
}

// parseSFNum parses sfnum, which the kernel keeps as a u32.
func parseSFNum(s string) (int, error) {
	n, err := parseDecimal("sfnum", s)
	if err == nil && (n < 0 || n > 1<<32-1) {
		err = fmt.Errorf("sfnum: %d is not a 32-bit unsigned number", n)
	}
	if err != nil {
		return -1, err
	}
	return n, nil
}

// auxType is the middle part of an auxiliary device's name
// <driver>.<type>.<index>, as sriovdp's auxTypes selector reads it: "sf"
// of mlx5_core.sf.4; "" for a name not of that form.
func auxType(name string) string {
	parts := strings.Split(name, ".")
	if len(parts) != 3 || parts[0] == "" || !isDigits(parts[2]) {
		return ""
	}
	return parts[1]
}

// belowSF reports whether a path relative to a PCI function, such as
// "mlx5_core.sf.4/net/enp6s0f0s88", leads through one of its SFs.
func belowSF(rel string) bool {
	first, _, _ := strings.Cut(rel, "/")
	return auxType(first) == "sf"
}

// completeSFs takes the SFs' link state from netlink and says which must
// not be offered, as complete does for functions.
func (a *assembler) completeSFs(sfs []SF) []SF {
	for i := range sfs {
		sf := &sfs[i]
		if sf.Netdev != nil {
			a.links.apply(sf.Netdev)
		}
		switch {
		case sf.Driver == "":
			sf.Excluded = append(sf.Excluded, "no driver is bound")
		case sf.Netdev != nil && sf.Netdev.DefaultRoute:
			sf.Excluded = append(sf.Excluded, fmt.Sprintf("its netdev %s carries the node's default route", sf.Netdev.Name))
		}
	}
	return sfs
}
