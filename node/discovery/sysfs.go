package discovery

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/dirent"
)

// attrReader reads the small attribute files of one sysfs directory at a
// time. Discovery reads tens of thousands of them, so it opens each
// relative to the directory's descriptor (the kernel walks neither the
// long path nor the bus/pci/devices symlink again) with raw
// openat/read/close, which costs half the system calls of os.ReadFile.
// An attrReader is not safe for concurrent use.
type attrReader struct {
	dirfd   int
	buf     [4096]byte
	dirents dirent.Reader
}

// cwdReader returns a reader whose relative paths start at the working
// directory, for reads that are not about one function's directory.
func cwdReader() *attrReader { return &attrReader{dirfd: unix.AT_FDCWD} }

// read returns the attribute at rel, relative to the directory, with
// surrounding white space trimmed. Errors name rel.
func (r *attrReader) read(rel string) (string, error) {
	fd, err := openat(r.dirfd, rel, unix.O_RDONLY)
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	defer unix.Close(fd)
	n := 0
	for n < len(r.buf) {
		m, err := unix.Read(fd, r.buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", rel, err)
		}
		n += m
		// sysfs hands over a whole attribute in one read; a short read is
		// its end, so the read that would return 0 is skipped.
		if m == 0 || n < len(r.buf) {
			break
		}
	}
	return strings.TrimSpace(string(r.buf[:n])), nil
}

// readInt reads a decimal attribute.
func (r *attrReader) readInt(rel string) (int, error) {
	s, err := r.read(rel)
	if err != nil {
		return 0, err
	}
	return parseDecimal(path.Base(rel), s)
}

// linkBase returns the last element of the target of the symlink at rel,
// e.g. the driver name of "driver -> ../../../bus/pci/drivers/ice". A
// dangling link is still readable: only its target's name matters here.
func (r *attrReader) linkBase(rel string) (string, error) {
	n, err := unix.Readlinkat(r.dirfd, rel, r.buf[:])
	if err != nil {
		return "", fmt.Errorf("%s: %w", rel, err)
	}
	return path.Base(string(r.buf[:n])), nil
}

// exists reports whether rel names an entry, without following a final
// symlink: a dangling link still says what the driver registered.
func (r *attrReader) exists(rel string) bool {
	var st unix.Stat_t
	return unix.Fstatat(r.dirfd, rel, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// dirNames lists the directory at rel without sorting or stat-ing entries.
func (r *attrReader) dirNames(rel string) ([]string, error) {
	fd, err := openat(r.dirfd, rel, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	defer unix.Close(fd)
	return r.listFD(fd, rel)
}

// listFD lists an open directory's entry names.
func (r *attrReader) listFD(fd int, name string) ([]string, error) {
	names, err := r.dirents.Names(fd)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return names, nil
}

// deviceEntries is what the listing of a PCI function's directory tells
// discovery.
type deviceEntries struct {
	physfn, sriov, net, infiniband bool
	// verbs and mad say the function has infiniband_verbs and
	// infiniband_mad class devices, uio a UIO device.
	verbs, mad, uio bool
	// virtfns are the names of a PF's virtfnN links.
	virtfns []string
}

// listDevice lists an open function directory, keeping only the entries
// discovery looks at: turning all of a VF's thirty-odd names into strings
// costs half as much again as the listing itself.
func (r *attrReader) listDevice(fd int, name string) (deviceEntries, error) {
	var d deviceEntries
	err := r.dirents.Each(fd, func(e []byte) {
		switch string(e) {
		case "physfn":
			d.physfn = true
		case "sriov_totalvfs":
			d.sriov = true
		case "net":
			d.net = true
		case "infiniband":
			d.infiniband = true
		case "infiniband_verbs":
			d.verbs = true
		case "infiniband_mad":
			d.mad = true
		case "uio":
			d.uio = true
		default:
			if len(e) > len("virtfn") && string(e[:len("virtfn")]) == "virtfn" {
				d.virtfns = append(d.virtfns, string(e))
			}
		}
	})
	if err != nil {
		return d, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

func openat(dirfd int, rel string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, rel, flags|unix.O_CLOEXEC, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// notExist reports whether err means the attribute is absent.
func notExist(err error) bool { return errors.Is(err, os.ErrNotExist) }

func parseDecimal(field, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a decimal number", field, s)
	}
	return n, nil
}

// parseNUMANode parses numa_node, where the kernel writes -1 for "none".
func parseNUMANode(s string) (int, error) {
	n, err := parseDecimal("numa_node", s)
	if err != nil {
		return -1, err
	}
	if n < -1 {
		return -1, fmt.Errorf("numa_node: %d is not a NUMA node", n)
	}
	return n, nil
}

// parseClass parses a PCI class attribute such as "0x020000".
func parseClass(s string) (uint32, error) {
	hex, ok := strings.CutPrefix(s, "0x")
	if !ok || len(hex) != 6 {
		return 0, fmt.Errorf("class: %q is not a 24-bit hex PCI class", s)
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return 0, fmt.Errorf("class: %q is not a 24-bit hex PCI class", s)
	}
	return uint32(v), nil
}

// pciUevent is what a PCI function's uevent attribute says of its identity.
type pciUevent struct {
	class          uint32
	vendor, device string
}

// parsePCIUevent reads PCI_CLASS ("20000") and PCI_ID ("8086:1889") from a
// PCI function's uevent. One read of it replaces three attribute reads.
func parsePCIUevent(s string) (pciUevent, error) {
	var u pciUevent
	var haveClass, haveID bool
	for line := range strings.Lines(s) {
		key, value, _ := strings.Cut(strings.TrimSpace(line), "=")
		switch key {
		case "PCI_CLASS":
			c, err := strconv.ParseUint(value, 16, 32)
			if err != nil || c > 0xffffff {
				return u, fmt.Errorf("uevent: PCI_CLASS %q is not a 24-bit hex PCI class", value)
			}
			u.class, haveClass = uint32(c), true
		case "PCI_ID":
			var ok bool
			u.vendor, u.device, ok = strings.Cut(value, ":")
			if !ok {
				return u, fmt.Errorf("uevent: PCI_ID %q is not of the form vvvv:dddd", value)
			}
			haveID = true
		}
	}
	if !haveClass || !haveID {
		return u, fmt.Errorf("uevent: PCI_CLASS or PCI_ID missing")
	}
	return u, nil
}

// parsePCIAddress checks a full PCI address "dddd:bb:dd.f" and returns it
// in lower case.
func parsePCIAddress(s string) (string, error) {
	bad := fmt.Errorf("PCI address %q is not of the form dddd:bb:dd.f", s)
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return "", bad
	}
	for i, c := range s {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !isHex(c) {
			return "", bad
		}
	}
	if s[8] > '1' || s[11] > '7' { // device 00-1f, function 0-7
		return "", bad
	}
	return strings.ToLower(s), nil
}

func isHex(c rune) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// parseHardwareAddr checks a colon-separated hardware address of 6 bytes
// (Ethernet) or 20 bytes (IPoIB) and returns it in lower case.
func parseHardwareAddr(s string) (string, int, error) {
	n := (len(s) + 1) / 3
	if (n != 6 && n != 20) || len(s) != 3*n-1 {
		return "", 0, fmt.Errorf("address: %q is not a 6- or 20-byte hardware address", s)
	}
	for i := 0; i < len(s); i++ {
		if i%3 == 2 {
			if s[i] != ':' {
				return "", 0, fmt.Errorf("address: %q is not a 6- or 20-byte hardware address", s)
			}
		} else if !isHex(rune(s[i])) {
			return "", 0, fmt.Errorf("address: %q is not a 6- or 20-byte hardware address", s)
		}
	}
	return strings.ToLower(s), n, nil
}

// parseGUID turns sysfs's node_guid form "0002:c903:0000:1234" into the
// byte form "00:02:c9:03:00:00:12:34" that ip link and CNI plugins use.
func parseGUID(s string) (string, error) {
	return groupsToBytes("node_guid", s, 4)
}

// parsePortGUID takes the port GUID from GID 0, whose low 64 bits it is:
// "fe80:0000:0000:0000:0002:c903:0000:1234".
func parsePortGUID(gid string) (string, error) {
	if len(gid) != 39 {
		return "", fmt.Errorf("gids/0: %q is not a 128-bit GID", gid)
	}
	if _, err := groupsToBytes("gids/0", gid[:19], 4); err != nil {
		return "", err
	}
	return groupsToBytes("gids/0", gid[20:], 4)
}

// groupsToBytes converts n colon-separated groups of four hex digits into
// colon-separated bytes.
func groupsToBytes(field, s string, n int) (string, error) {
	bad := fmt.Errorf("%s: %q is not %d colon-separated groups of 4 hex digits", field, s, n)
	if len(s) != 5*n-1 {
		return "", bad
	}
	var b strings.Builder
	b.Grow(3*2*n - 1)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i%5 == 4 {
			if c != ':' {
				return "", bad
			}
			continue
		}
		if !isHex(rune(c)) {
			return "", bad
		}
		if b.Len() > 0 && (i%5 == 0 || i%5 == 2) {
			b.WriteByte(':')
		}
		b.WriteByte(lower(c))
	}
	return b.String(), nil
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// parseVirtfn returns N of a "virtfnN" entry name.
func parseVirtfn(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "virtfn")
	if !ok || digits == "" || digits[0] < '0' || digits[0] > '9' || (len(digits) > 1 && digits[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, false
	}
	return n, true
}
