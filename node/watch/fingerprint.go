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
	"strings"
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
	return newPCIScanner(sysfsRoot).fingerprint()
}

// pciScanner takes fingerprints with a few system calls per driver rather
// than per function: system calls are what a scan costs, and a node has
// thousands of VFs but a handful of drivers. It lists bus/pci/devices, then
// each bus/pci/drivers/<driver> for the functions the driver binds (the
// kernel links a function there exactly when its driver link exists), and
// reads sriov_numvfs of the PFs.
type pciScanner struct {
	pci string
	// sriov says whether a function has sriov_numvfs, which only PFs do.
	// A function keeps its answer while it exists, so each one is probed
	// once, not on every scan.
	sriov map[string]bool
	buf   []byte
	// dirents lists directories, retrying interrupted getdents calls.
	dirents dirent.Reader
}

func newPCIScanner(sysfsRoot string) *pciScanner {
	return &pciScanner{
		pci:   filepath.Join(sysfsRoot, "bus/pci"),
		sriov: map[string]bool{},
		buf:   make([]byte, 1<<15),
	}
}

func (s *pciScanner) fingerprint() (string, error) {
	pci, err := unix.Open(s.pci, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", &os.PathError{Op: "open", Path: s.pci, Err: err}
	}
	defer unix.Close(pci)
	names, err := s.list(pci, "devices")
	if err != nil {
		return "", err
	}
	drivers, err := s.drivers(pci)
	if err != nil {
		return "", err
	}
	slices.Sort(names)
	var b strings.Builder
	b.Grow(len(names) * 32)
	for _, name := range names {
		driver, ok := drivers[name]
		if !ok {
			driver = "-"
		}
		numVFs, err := s.numVFs(pci, name)
		if err != nil {
			return "", err
		}
		b.WriteString(name + " " + driver + " " + numVFs + "\n")
	}
	s.forgetGone(names)
	return b.String(), nil
}

// drivers maps the functions bound to a driver to its name. It maps a
// driver's other entries (bind, unbind, module...) too, which match no
// function.
func (s *pciScanner) drivers(pci int) (map[string]string, error) {
	names, err := s.list(pci, "drivers")
	if err != nil {
		return nil, err
	}
	bound := map[string]string{}
	for _, driver := range names {
		entries, err := s.list(pci, "drivers/"+driver)
		if errors.Is(err, fs.ErrNotExist) {
			continue // unloaded since the listing
		}
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			bound[e] = driver
		}
	}
	return bound, nil
}

// list returns the names in the directory rel below the open directory
// dir.
func (s *pciScanner) list(dir int, rel string) ([]string, error) {
	fd, err := unix.Openat(dir, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: filepath.Join(s.pci, rel), Err: err}
	}
	defer unix.Close(fd)
	names, err := s.dirents.Names(fd)
	if err != nil {
		return nil, &os.PathError{Op: "getdents", Path: filepath.Join(s.pci, rel), Err: err}
	}
	return names, nil
}

// numVFs returns the function's sriov_numvfs, or "-" when it has none.
func (s *pciScanner) numVFs(pci int, name string) (string, error) {
	if has, probed := s.sriov[name]; probed && !has {
		return "-", nil
	}
	rel := "devices/" + name + "/sriov_numvfs"
	fd, err := unix.Openat(pci, rel, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		s.sriov[name] = false
		return "-", nil
	}
	if err != nil {
		return "", &os.PathError{Op: "open", Path: filepath.Join(s.pci, rel), Err: err}
	}
	defer unix.Close(fd)
	s.sriov[name] = true
	n, err := unix.Read(fd, s.buf)
	if err != nil {
		return "", &os.PathError{Op: "read", Path: filepath.Join(s.pci, rel), Err: err}
	}
	return string(bytes.TrimSpace(s.buf[:n])), nil
}

// forgetGone drops the SR-IOV answers of functions no longer listed, so
// that an address that comes back is probed again.
func (s *pciScanner) forgetGone(names []string) {
	if len(s.sriov) == len(names) {
		return // every listed name has an answer, so none is stale
	}
	kept := make(map[string]bool, len(names))
	for _, name := range names {
		if has, ok := s.sriov[name]; ok {
			kept[name] = has
		}
	}
	s.sriov = kept
}

// PCIPoller watches a sysfs tree's PCI layout by taking its Fingerprint
// periodically: often where no uevents can be had, and seldom beside
// them, to catch what a lost uevent would miss.
type PCIPoller struct {
	scan *pciScanner
	last string
}

// NewPCIPoller takes the first fingerprint of the tree at sysfsRoot, the
// one Run compares against.
func NewPCIPoller(sysfsRoot string) (*PCIPoller, error) {
	p := &PCIPoller{scan: newPCIScanner(sysfsRoot)}
	fp, err := p.scan.fingerprint()
	if err != nil {
		return nil, fmt.Errorf("poll PCI functions: %w", err)
	}
	p.last = fp
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
		if fp == p.last {
			continue
		}
		p.last = fp
		select {
		case out <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
	}
}
