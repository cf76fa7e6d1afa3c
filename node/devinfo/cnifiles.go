package devinfo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CNIName is one reading of a CNI device-info file's name, as CNIFileName
// made it.
type CNIName struct {
	// Network is the network's name with '-' for each '/'.
	Network     string
	ContainerID string
	IfName      string
}

// maxIfName is the kernel's IFNAMSIZ less its terminating NUL: no
// interface name is longer.
const maxIfName = 15

// ParseCNIFileName is every reading of name as
// <network>-<containerID>_<ifName>, each part non-empty, the network not
// starting with '.' and the interface name at most 15 bytes. A name may
// read several ways, as each part may hold '-' and '_': CNIFileName of
// "ns/net", "x-a" and "net1" reads as container "x-a" on network "ns-net"
// and as container "a" on network "ns-net-x". The readings come shortest
// interface name first, then shortest network.
func ParseCNIFileName(name string) []CNIName {
	if strings.ContainsRune(name, '/') || strings.HasPrefix(name, ".") {
		return nil
	}
	var out []CNIName
	for i := len(name) - 2; i > 0 && len(name)-i-1 <= maxIfName; i-- {
		if name[i] != '_' {
			continue
		}
		head, ifName := name[:i], name[i+1:]
		for j := 1; j < len(head)-1; j++ {
			if head[j] == '-' {
				out = append(out, CNIName{Network: head[:j], ContainerID: head[j+1:], IfName: ifName})
			}
		}
	}
	return out
}

// CNIFile is a CNI device-info file of one container.
type CNIFile struct {
	Path string
	CNIName
}

// CNIFiles lists the CNI device-info files in dir of the container with
// the ID containerID, sorted by name; a missing dir has none. A file is
// the container's when a reading of its name has exactly that ID, so an
// ID with glob characters, or one that another ID ends with, takes no
// other container's file by its name alone; unless a reading also has
// the ID of a container other says has files there too: that name may be
// either's, and is left to its other owner. other may be nil.
func CNIFiles(dir, containerID string, other func(id string) bool) ([]CNIFile, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("device info: %w", err)
	}
	var files []CNIFile
	for _, e := range entries {
		if n, ok := containerReading(e.Name(), containerID, other); ok && e.Type().IsRegular() {
			files = append(files, CNIFile{Path: filepath.Join(dir, e.Name()), CNIName: n})
		}
	}
	return files, nil
}

// containerReading is the first reading of name with the container ID,
// unless another reading has the ID of a container other names.
func containerReading(name, containerID string, other func(id string) bool) (CNIName, bool) {
	readings := ParseCNIFileName(name)
	i := slices.IndexFunc(readings, func(r CNIName) bool { return r.ContainerID == containerID })
	if i < 0 {
		return CNIName{}, false
	}
	if other != nil && slices.ContainsFunc(readings, func(r CNIName) bool { return r.ContainerID != containerID && other(r.ContainerID) }) {
		return CNIName{}, false
	}
	return readings[i], true
}
