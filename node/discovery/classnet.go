package discovery

import (
	"path"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// classNetDir lists every netdev of the node, each a link to its device
// directory.
const classNetDir = "class/net"

// netdevIndex finds the netdevs that hang below a PCI function's
// sub-devices rather than in its own net/ directory: virtio-net's
// <function>/virtioN/net/<name>. A netdev below a scalable function
// (<function>/mlx5_core.sf.N/net/<name>) is the SF's, not the function's.
// It is built once, on the first function that has no net/ directory, from
// class/net/*: each link's target resolved up to its nearest PCI function.
type netdevIndex struct {
	sysfsRoot string
	once      sync.Once
	// byFunction maps a PCI address to its netdevs' directories relative
	// to the function's, e.g. "virtio0/net/eth0".
	byFunction map[string][]string
}

// below returns the netdev directories of the function at address that
// are not in its own net/ directory.
func (x *netdevIndex) below(address string) []string {
	x.once.Do(x.build)
	return x.byFunction[address]
}

func (x *netdevIndex) build() {
	x.byFunction = map[string][]string{}
	r := cwdReader()
	dir := filepath.Join(x.sysfsRoot, classNetDir)
	names, err := r.dirNames(dir)
	if err != nil {
		return // no class/net (a partial tree): nothing hangs below
	}
	for _, name := range names {
		n, err := unix.Readlinkat(unix.AT_FDCWD, filepath.Join(dir, name), r.buf[:])
		if err != nil {
			continue
		}
		// A netdev below an SF is the SF's, not its PF's.
		if addr, rel, ok := splitAtFunction(string(r.buf[:n])); ok && path.Dir(rel) != "net" && !belowSF(rel) {
			x.byFunction[addr] = append(x.byFunction[addr], rel)
		}
	}
}

// splitAtFunction splits a class/net link target such as
// "../../devices/pci0000:00/0000:00:03.0/virtio0/net/eth0" at its last PCI
// function: "0000:00:03.0" and "virtio0/net/eth0". Virtual netdevs
// (devices/virtual/net/...) have none.
func splitAtFunction(target string) (address, rel string, ok bool) {
	parts := strings.Split(path.Clean(target), "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if _, err := parsePCIAddress(parts[i]); err == nil {
			return parts[i], path.Join(parts[i+1:]...), true
		}
	}
	return "", "", false
}
