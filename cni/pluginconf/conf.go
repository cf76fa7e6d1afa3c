// Package pluginconf is hwnet's own CNI configuration: the file hwnet-agent
// writes into the runtime's configuration directory, which the runtime hands
// to the hwnet shim on every call and the shim forwards to the agent.
package pluginconf

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/api/cnicache"
	"github.com/hwnet-io/hwnet/cni/cninames"
	"github.com/hwnet-io/hwnet/cni/wire"
)

// Type is the plugin type, the name of the shim binary.
const Type = "hwnet"

// Defaults used when the configuration leaves a field out.
const (
	DefaultSocketPath = "/run/hwnet/cni.sock"
	DefaultCacheDir   = "/var/lib/hwnet/cni"
	DefaultAgentWait  = 30 * time.Second
)

// Conf is hwnet's CNI configuration, as the runtime passes it.
type Conf struct {
	// CNIVersion is as written; "" means 0.1.0, see Version.
	CNIVersion string `json:"cniVersion,omitempty"`
	Name       string `json:"name,omitempty"`
	Type       string `json:"type"`
	// SocketPath is where hwnet-agent serves CNI requests.
	SocketPath string `json:"socketPath,omitempty"`
	// CacheDir holds the attachment records DEL falls back on.
	CacheDir string `json:"cacheDir,omitempty"`
	// RuntimeCacheDir is the runtime's libcni cache directory, read for
	// the DEL of a container the runtime attached to the default network
	// before hwnet's configuration was on the node.
	RuntimeCacheDir string `json:"runtimeCacheDir,omitempty"`
	// AgentWait bounds how long ADD and CHECK wait for an agent that is not
	// (yet) listening, e.g. while its DaemonSet pod restarts. An explicit
	// "0s" means do not wait; an absent agentWait means DefaultAgentWait.
	AgentWait Duration `json:"agentWait,omitempty"`
	// DefaultNetwork is the file of the cluster-wide default network's
	// configuration, attached first to every pod (NPWG 6, 6.2).
	DefaultNetwork string `json:"defaultNetwork,omitempty"`
	// Capabilities are the default network's, so the runtime passes its
	// runtimeConfig on (NPWG 7.5).
	Capabilities  map[string]bool            `json:"capabilities,omitempty"`
	RuntimeConfig map[string]json.RawMessage `json:"runtimeConfig,omitempty"`
}

// Parse decodes and checks a configuration, filling in defaults. Errors
// are CNI errors naming the field and value.
func Parse(data []byte) (*Conf, error) {
	// AgentWait starts at its default so that an absent agentWait keeps it
	// while an explicit "0s" overwrites it.
	c := Conf{AgentWait: Duration(DefaultAgentWait)}
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, decodeError(err)
	}
	c.SocketPath = cmp.Or(c.SocketPath, DefaultSocketPath)
	c.CacheDir = cmp.Or(c.CacheDir, DefaultCacheDir)
	c.RuntimeCacheDir = cmp.Or(c.RuntimeCacheDir, cnicache.DefaultDir)
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

func decodeError(err error) error {
	// AgentWait is Conf's only Duration, so a bad duration is its value.
	if bad := (*badDurationError)(nil); errors.As(err, &bad) {
		return invalidConfig("agentWait", bad.value, "want a non-negative duration such as \"30s\"")
	}
	return types.NewError(types.ErrDecodingFailure, fmt.Sprintf("hwnet network configuration: %v", err), "")
}

func (c *Conf) validate() error {
	if !slices.Contains(version.All.SupportedVersions(), c.Version()) {
		return types.NewError(types.ErrIncompatibleCNIVersion, "incompatible CNI versions",
			fmt.Sprintf("config is %q, hwnet supports %q", c.CNIVersion, version.All.SupportedVersions()))
	}
	if c.Name == "" {
		return types.NewError(types.ErrInvalidNetworkConfig, "hwnet network configuration: missing network name", "")
	}
	if err := cninames.ValidateNetworkName(c.Name); err != nil {
		return err
	}
	if err := checkAbsolute("socketPath", c.SocketPath); err != nil {
		return err
	}
	if err := checkAbsolute("cacheDir", c.CacheDir); err != nil {
		return err
	}
	return checkAbsolute("runtimeCacheDir", c.RuntimeCacheDir)
}

// Version is the configuration's CNI version: an absent cniVersion means
// 0.1.0 (CNI spec, "Network Configuration").
func (c *Conf) Version() string {
	return cmp.Or(c.CNIVersion, "0.1.0")
}

// AllowsCommand refuses commands newer than the configuration's CNI
// version, as libcni's skel does: CHECK needs 0.4.0, STATUS and GC 1.1.0.
func (c *Conf) AllowsCommand(command string) error {
	minVersion := minCNIVersion(command)
	if minVersion == "" {
		return nil
	}
	ok, err := version.GreaterThanOrEqualTo(c.Version(), minVersion)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, err.Error(), "")
	}
	if !ok {
		return types.NewError(types.ErrIncompatibleCNIVersion,
			fmt.Sprintf("config version %q does not allow %s (needs %s or later)", c.Version(), command, minVersion), "")
	}
	return nil
}

// minCNIVersion is the first CNI version with command, "" for the commands
// every version has.
func minCNIVersion(command string) string {
	switch command {
	case wire.CommandCheck:
		return "0.4.0"
	case wire.CommandStatus, wire.CommandGC:
		return "1.1.0"
	}
	return ""
}

func checkAbsolute(field, path string) error {
	if !filepath.IsAbs(path) {
		return invalidConfig(field, path, "want an absolute path")
	}
	return nil
}

func invalidConfig(field, value, want string) error {
	return types.NewError(types.ErrInvalidNetworkConfig,
		fmt.Sprintf("hwnet network configuration: invalid %q %q: %s", field, value, want), "")
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// String formats the duration as time.Duration does.
func (d Duration) String() string {
	return time.Duration(d).String()
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads a duration string; null leaves d as it is.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		// encoding/json adds the field name to this error type.
		return &json.UnmarshalTypeError{Value: string(b), Type: reflect.TypeFor[Duration]()}
	}
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return &badDurationError{value: s}
	}
	*d = Duration(v)
	return nil
}

// badDurationError is a duration string that does not parse or is
// negative: a wrong value rather than undecodable JSON.
type badDurationError struct{ value string }

func (e *badDurationError) Error() string {
	return fmt.Sprintf("duration %q: want a non-negative duration such as \"30s\"", e.value)
}
