package watch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/dirent"
)

// Fingerprint summarises the PCI layout of the sysfs tree at sysfsRoot:
// one line per function of bus/pci/devices, in address order, with the
// driver bound to it and, on a PF, its sriov_numvfs ("-" for none):
//
//	0000:3b:00.0 ice 8
//	0000:3b:01.0 iavf -
//
// It changes when a function appears or goes, a driver binds or unbinds,
// or SR-IOV is enabled or disabled: what the kernel announces with
// uevents, which can be lost or, in some namespaces, not be had.
//
// The PCIPoller takes them with a scanner it keeps; this one-shot form is
// what the tests and benchmarks measure.
func Fingerprint(sysfsRoot string) (string, error) {
	fp, err := newPCIScanner(sysfsRoot).fingerprint()
	return string(fp), err
}

// pciScanner takes fingerprints with a few system calls per driver rather
// than per function: system calls are what a scan costs, and a node has
// thousands of VFs but a handful of drivers. It lists bus/pci/devices, then
// each bus/pci/drivers/<driver> for the functions the driver binds (the
// kernel links a function there exactly when its driver link exists), and
// reads sriov_numvfs of the PFs. It keeps what it learnt and the buffers it
// built with between scans, so that a scan of an unchanged node makes no
// garbage: at 2048 VFs a scan's 676 KB of it set off a collection of the
// agent's heap every few rescans, four times the scan's own CPU.
type pciScanner struct {
	pci string
	// functions are the functions the last scan listed, by address.
	functions map[string]*function
	// drivers interns driver names, which a scan reads as bytes.
	drivers map[string]string
	// scan numbers the scans, to tell which functions the current one saw.
	scan uint64
	// names, driverNames and out are the current scan's, reused.
	names, driverNames []string
	out                []byte
	buf                []byte
	// dirents lists directories, retrying interrupted getdents calls.
	dirents dirent.Reader
}

// function is what the scanner knows of one PCI function.
type function struct {
	name string
	// probed and sriov say whether it has sriov_numvfs, which only PFs do.
	// A function keeps its answer while it exists, so each one is probed
	// once, not on every scan.
	probed, sriov bool
	// driver is the driver the scan found it bound to, "-" for none.
	driver string
	// seen is the last scan that listed it.
	seen uint64
}

func newPCIScanner(sysfsRoot string) *pciScanner {
	return &pciScanner{
		pci:       filepath.Join(sysfsRoot, "bus/pci"),
		functions: map[string]*function{},
		drivers:   map[string]string{},
		buf:       make([]byte, 1<<15),
	}
}

// fingerprint returns the tree's fingerprint in a buffer the next scan
// reuses.
func (s *pciScanner) fingerprint() ([]byte, error) {
	pci, err := unix.Open(s.pci, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: s.pci, Err: err}
	}
	defer unix.Close(pci)
	s.scan++
	if err := s.listFunctions(pci); err != nil {
		return nil, err
	}
	if err := s.bindDrivers(pci); err != nil {
		return nil, err
	}
	slices.Sort(s.names)
	s.out = s.out[:0]
	for _, name := range s.names {
		f := s.functions[name]
		s.out = append(append(append(append(s.out, name...), ' '), f.driver...), ' ')
		if s.out, err = s.appendNumVFs(s.out, pci, f); err != nil {
			return nil, err
		}
		s.out = append(s.out, '\n')
	}
	s.forgetGone()
	return s.out, nil
}

// listFunctions lists bus/pci/devices into names, each function unbound
// until bindDrivers finds its driver.
func (s *pciScanner) listFunctions(pci int) error {
	s.names = s.names[:0]
	return s.each(pci, "devices", func(name []byte) {
		f, ok := s.functions[string(name)]
		if !ok {
			f = &function{name: string(name)}
			s.functions[f.name] = f
		}
		f.seen, f.driver = s.scan, "-"
		s.names = append(s.names, f.name)
	})
}

// bindDrivers gives each listed function the driver whose directory
// links it. A driver's other entries (bind, unbind, module...) match no
// function.
func (s *pciScanner) bindDrivers(pci int) error {
	s.driverNames = s.driverNames[:0]
	err := s.each(pci, "drivers", func(name []byte) {
		driver, ok := s.drivers[string(name)]
		if !ok {
			driver = string(name)
			s.drivers[driver] = driver
		}
		s.driverNames = append(s.driverNames, driver)
	})
	if err != nil {
		return err
	}
	for _, driver := range s.driverNames {
		err := s.each(pci, "drivers/"+driver, func(entry []byte) {
			if f, ok := s.functions[string(entry)]; ok && f.seen == s.scan {
				f.driver = driver
			}
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue // unloaded since the listing
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// each calls fn with each entry name of the directory rel below the open
// directory dir, as a slice valid until fn returns.
func (s *pciScanner) each(dir int, rel string, fn func(name []byte)) error {
	fd, err := unix.Openat(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: filepath.Join(s.pci, rel), Err: err}
	}
	defer unix.Close(fd)
	if err := s.dirents.Each(fd, fn); err != nil {
		return &os.PathError{Op: "getdents", Path: filepath.Join(s.pci, rel), Err: err}
	}
	return nil
}

// appendNumVFs appends the function's sriov_numvfs to dst, or "-" when it
// has none.
func (s *pciScanner) appendNumVFs(dst []byte, pci int, f *function) ([]byte, error) {
	if f.probed && !f.sriov {
		return append(dst, '-'), nil
	}
	rel := "devices/" + f.name + "/sriov_numvfs"
	fd, err := unix.Openat(pci, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		f.probed, f.sriov = true, false
		return append(dst, '-'), nil
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(s.pci, rel), Err: err}
	}
	defer unix.Close(fd)
	f.probed, f.sriov = true, true
	n, err := unix.Read(fd, s.buf)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: filepath.Join(s.pci, rel), Err: err}
	}
	return append(dst, bytes.TrimSpace(s.buf[:n])...), nil
}

// forgetGone drops the functions the scan did not list, so that an
// address that comes back is probed again.
func (s *pciScanner) forgetGone() {
	if len(s.functions) == len(s.names) {
		return // every function known was listed, so none is gone
	}
	for name, f := range s.functions {
		if f.seen != s.scan {
			delete(s.functions, name)
		}
	}
}

// PCIPoller watches a sysfs tree's PCI layout by taking its Fingerprint
// periodically: often where no uevents can be had, and seldom beside
// them, to catch what a lost uevent would miss.
type PCIPoller struct {
	scan *pciScanner
	last []byte
}

// NewPCIPoller takes the first fingerprint of the tree at sysfsRoot, the
// one Run compares against.
func NewPCIPoller(sysfsRoot string) (*PCIPoller, error) {
	p := &PCIPoller{scan: newPCIScanner(sysfsRoot)}
	fp, err := p.scan.fingerprint()
	if err != nil {
		return nil, fmt.Errorf("poll PCI functions: %w", err)
	}
	p.last = bytes.Clone(fp)
	return p, nil
}

// Run takes a fingerprint every interval and sends to out when it differs
// from the last one, until ctx is done. While out is not ready it takes
// none, so one send covers any number of changes.
func (p *PCIPoller) Run(ctx context.Context, interval time.Duration, out chan<- struct{}) error {
	if interval <= 0 {
		return fmt.Errorf("poll PCI functions: interval %v: must be positive", interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		fp, err := p.scan.fingerprint()
		if err != nil {
			return fmt.Errorf("poll PCI functions: %w", err)
		}
		if bytes.Equal(fp, p.last) {
			continue
		}
		p.last = append(p.last[:0], fp...)
		select {
		case out <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
	}
}
