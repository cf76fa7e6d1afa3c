// Package cnicache reads libcni's result cache: what a container runtime's
// libcni keeps of each ADD it ran (kind "cniCacheV1", libcni 0.8 to 1.x),
// so a DEL can run with the ADD's configuration, arguments and result.
// hwnet reads it for containers the runtime attached to the default network
// itself, before hwnet's configuration was on the node; it never writes it.
package cnicache

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Kind is the one cache format libcni writes.
const Kind = "cniCacheV1"

// DefaultDir is libcni's cache directory when the runtime sets none
// (libcni.CacheDir); containerd and CRI-O keep it.
const DefaultDir = "/var/lib/cni"

// MaxSize bounds an entry: a configuration list and one result, far below.
const MaxSize = 1 << 20

// ErrMalformed wraps every decoding error: not an entry hwnet can use.
var ErrMalformed = errors.New("malformed libcni cache entry")

// Entry is one cached ADD of one network on one interface of a container.
type Entry struct {
	Kind        string `json:"kind"`
	ContainerID string `json:"containerId"`
	// Config is the configuration list the ADD ran with.
	Config      []byte `json:"config"`
	IfName      string `json:"ifName"`
	NetworkName string `json:"networkName"`
	NetNS       string `json:"netns,omitempty"`
	// CNIArgs are the CNI_ARGS pairs the ADD was given.
	CNIArgs [][2]string `json:"cniArgs,omitempty"`
	// CapabilityArgs are the runtimeConfig values the ADD was given.
	CapabilityArgs map[string]json.RawMessage `json:"capabilityArgs,omitempty"`
	// Result is the ADD's result, in the list's version.
	Result json.RawMessage `json:"result,omitempty"`
}

// Path is the entry libcni keeps in dir for network's ADD on the
// container's interface. Each name must be one path element.
func Path(dir, network, containerID, ifName string) (string, error) {
	for _, name := range [][2]string{{"network", network}, {"containerID", containerID}, {"ifName", ifName}} {
		if name[1] == "" || name[1] == "." || name[1] == ".." || strings.ContainsRune(name[1], '/') {
			return "", fmt.Errorf("libcni cache entry: %s %q is not a file name", name[0], name[1])
		}
	}
	return filepath.Join(dir, "results", network+"-"+containerID+"-"+ifName), nil
}

// Read reads and decodes the entry at path. A missing file is an error
// wrapping fs.ErrNotExist; errors name the file.
func Read(path string) (*Entry, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("libcni cache entry %s: %w", path, err)
	}
	e, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return e, nil
}

// Decode decodes an entry: a JSON object of Kind, over MaxSize or of
// another kind is an error wrapping ErrMalformed.
func Decode(data []byte) (*Entry, error) {
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: %d bytes, over the limit of %d", ErrMalformed, len(data), MaxSize)
	}
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if e.Kind != Kind {
		return nil, fmt.Errorf("%w: kind %q, want %q", ErrMalformed, e.Kind, Kind)
	}
	if len(e.Config) == 0 {
		return nil, fmt.Errorf("%w: no config", ErrMalformed)
	}
	return &e, nil
}

// Matches says whether the entry is the one of network's ADD on the
// container's interface, as its file name claims.
func (e *Entry) Matches(network, containerID, ifName string) error {
	if e.NetworkName != network || e.ContainerID != containerID || e.IfName != ifName {
		return fmt.Errorf("libcni cache entry of network %q, container %q, interface %q, want %q, %q, %q",
			e.NetworkName, e.ContainerID, e.IfName, network, containerID, ifName)
	}
	return nil
}
