// Package chain is hwnet's one CNI engine: it runs a delegate's
// configuration list the way libcni does (CNI spec 0.3.0 section "Network
// Configuration Lists"; CNI 1.x "Attachment"): ADD runs each plugin in
// order, given the list's name and cniVersion, the previous plugin's result
// as prevResult, and the runtimeConfig values of the capabilities it
// declares; DEL runs them in reverse and CHECK in order, both given the
// ADD's result as prevResult (CNI 0.4.0 and later); STATUS and GC (CNI
// 1.1) run each plugin in order. Tests hold each plugin's stdin and
// environment equal to libcni's for every command.
//
// It exists because ADD is on every pod's start path: libcni re-encodes a
// plugin's whole configuration through map[string]interface{} once per
// injected key, copies and de-duplicates the process environment per
// plugin, and writes a result file per attachment. Chain encodes each
// plugin's stdin once from the raw fields netconf kept, builds the
// environment once per attachment, and leaves the result to the caller,
// which keeps it in its own record (package attachments): one file write
// per container instead of one per attachment.
package chain

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/cninames"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/pluginexec"
)

// Runtime is what the runtime side gives one attachment besides its
// configuration: CNI_* variables and runtimeConfig values.
type Runtime struct {
	ContainerID string
	Netns       string
	IfName      string
	// Args are the CNI_ARGS pairs.
	Args [][2]string
	// CapabilityArgs are runtimeConfig values by capability; a plugin gets
	// those it declares.
	CapabilityArgs map[string]json.RawMessage
}

// Exec runs plugins: libcni's invoke.Exec, whose implementations it
// takes. It is declared here because importing libcni's invoke package
// links OpenTelemetry and net/http into the CNI shim, whose every exec
// pays for their initialisation.
type Exec interface {
	ExecPlugin(ctx context.Context, pluginPath string, stdinData []byte, environ []string) ([]byte, error)
	FindInPath(plugin string, paths []string) (string, error)
	Decode(jsonBytes []byte) (version.PluginInfo, error)
}

// Chain runs configuration lists with one plugin search path and executor.
type Chain struct {
	exec    Exec
	path    []string
	environ []string
}

// New returns a Chain. exec nil runs plugins as processes that die with
// the caller (package pluginexec); environ is the environment plugins
// inherit, CNI_* variables dropped from it.
func New(exec Exec, path []string, environ []string) *Chain {
	if exec == nil {
		exec = pluginexec.New(os.Stderr)
	}
	base := make([]string, 0, len(environ)+6)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "CNI_") {
			base = append(base, kv)
		}
	}
	return &Chain{exec: exec, path: path, environ: base}
}

// Add runs ADD for every plugin of list in order and returns the last
// result, which DEL and CHECK need later, decoded and as JSON.
func (c *Chain) Add(ctx context.Context, list *netconf.Delegate, rt Runtime) (types.Result, []byte, error) {
	if err := validate(list.Name, rt); err != nil {
		return nil, nil, err
	}
	env := c.env("ADD", rt)
	var result types.Result
	var out []byte
	for _, p := range list.Plugins {
		path, stdin, err := c.prepare(list, p, result, rt)
		if err == nil {
			result, out, err = c.execAdd(ctx, path, stdin, env, list.CNIVersion)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("plugin type=%q failed (add): %w", p.Type, err)
		}
	}
	return result, out, nil
}

// execAdd runs one plugin's ADD and decodes its result as libcni does
// (invoke.ExecPluginWithResult): in the version the result states, or
// else in the configuration's, which is the list's. Unlike libcni it does
// not decode the plugin's configuration again to learn that version, nor
// the result into a map to learn the result's. It returns the result also
// as JSON: as the plugin printed it, when that states its version.
func (c *Chain) execAdd(ctx context.Context, path string, stdin []byte, env []string, confVersion string) (types.Result, []byte, error) {
	out, err := c.exec.ExecPlugin(ctx, path, stdin, env)
	if err != nil {
		return nil, nil, err
	}
	version := statedVersion(out)
	if version == "" {
		// A configuration without a version is 0.1.0 (CNI spec).
		version = cmp.Or(confVersion, "0.1.0")
		if out, err = withVersion(out, version); err != nil {
			return nil, nil, err
		}
	}
	res, err := create.Create(version, out)
	if err != nil {
		return nil, nil, err
	}
	return res, out, nil
}

// statedVersion is a result's cniVersion, "" when it states none or not
// as a string. The key matches case-insensitively, unlike libcni's
// lookup; decoding the result matches it so too.
func statedVersion(out []byte) string {
	var stated struct {
		CNIVersion any `json:"cniVersion"`
	}
	if json.Unmarshal(out, &stated) != nil {
		return ""
	}
	v, _ := stated.CNIVersion.(string)
	return v
}

// withVersion sets a result's cniVersion, as libcni does for a plugin
// that stated none.
func withVersion(out []byte, version string) ([]byte, error) {
	var raw map[string]any
	if err := json.Unmarshal(out, &raw); err != nil {
		return nil, fmt.Errorf("failed to unmarshal raw result: %w", err)
	}
	if raw == nil { // the plugin printed null
		raw = map[string]any{}
	}
	raw["cniVersion"] = version
	fixed, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to remarshal fixed result: %w", err)
	}
	return fixed, nil
}

// MissingPluginsError is a DEL that ran every plugin of a list but those
// not found in the plugin path. Whatever they made, if anything (an ADD
// that failed for want of the plugin made nothing), stays; the caller
// decides whether that fails the DEL.
type MissingPluginsError struct {
	Types []string
	Err   error
}

func (e *MissingPluginsError) Error() string {
	return fmt.Sprintf("DEL skipped plugins %s: %v", strings.Join(e.Types, ", "), e.Err)
}

func (e *MissingPluginsError) Unwrap() error { return e.Err }

// Del runs DEL for every plugin of list in reverse order. added is the
// ADD's result, nil when unknown; plugins get it as prevResult from CNI
// 0.4.0 on, converted to the list's version. The first plugin that fails
// stops it, as libcni does; plugins not found are passed over and
// reported as a *MissingPluginsError once the others ran.
func (c *Chain) Del(ctx context.Context, list *netconf.Delegate, rt Runtime, added types.Result) error {
	prev, err := prevResult(list.CNIVersion, added)
	if err != nil {
		return err
	}
	env := c.env("DEL", rt)
	var missing MissingPluginsError
	for i := len(list.Plugins) - 1; i >= 0; i-- {
		p := list.Plugins[i]
		path, err := c.exec.FindInPath(p.Type, c.path)
		if err != nil {
			missing.Types = append(missing.Types, p.Type)
			missing.Err = errors.Join(missing.Err, err)
			continue
		}
		stdin, err := PluginConfig(list, p, prev, rt.CapabilityArgs)
		if err == nil {
			_, err = c.exec.ExecPlugin(ctx, path, stdin, env)
		}
		if err != nil {
			return fmt.Errorf("plugin type=%q failed (delete): %w", p.Type, err)
		}
	}
	if missing.Types != nil {
		return &missing
	}
	return nil
}

// ErrCheckNotSupported is CHECK of a list older than CNI 0.4.0.
var ErrCheckNotSupported = errors.New("does not support the CHECK command")

// Check runs CHECK for every plugin of list in order, each given added
// as prevResult, unless the list disables it.
func (c *Chain) Check(ctx context.Context, list *netconf.Delegate, rt Runtime, added types.Result) error {
	if ok, err := version.GreaterThanOrEqualTo(list.CNIVersion, "0.4.0"); err != nil || !ok {
		return fmt.Errorf("configuration version %q %w", list.CNIVersion, ErrCheckNotSupported)
	}
	if list.DisableCheck {
		return nil
	}
	prev, err := prevResult(list.CNIVersion, added)
	if err != nil {
		return err
	}
	env := c.env("CHECK", rt)
	for _, p := range list.Plugins {
		path, stdin, err := c.prepare(list, p, prev, rt)
		if err == nil {
			_, err = c.exec.ExecPlugin(ctx, path, stdin, env)
		}
		if err != nil {
			return fmt.Errorf("plugin type=%q failed (check): %w", p.Type, err)
		}
	}
	return nil
}

// prevResult is what DEL and CHECK give plugins: nothing before CNI
// 0.4.0, else the ADD's result in the list's version.
func prevResult(listVersion string, added types.Result) (types.Result, error) {
	ok, err := version.GreaterThanOrEqualTo(listVersion, "0.4.0")
	if err != nil {
		return nil, fmt.Errorf("cniVersion %q: %w", listVersion, err)
	}
	if !ok || added == nil {
		return nil, nil
	}
	prev, err := added.GetAsVersion(listVersion)
	if err != nil {
		return nil, fmt.Errorf("ADD result as version %s: %w", listVersion, err)
	}
	return prev, nil
}

func (c *Chain) prepare(list *netconf.Delegate, p netconf.Plugin, prev types.Result, rt Runtime) (string, []byte, error) {
	path, err := c.exec.FindInPath(p.Type, c.path)
	if err != nil {
		return "", nil, err
	}
	stdin, err := PluginConfig(list, p, prev, rt.CapabilityArgs)
	return path, stdin, err
}

// validate refuses what libcni refuses before running a plugin. The
// validators return *types.Error, which must not become a non-nil error.
func validate(network string, rt Runtime) error {
	if err := cninames.ValidateContainerID(rt.ContainerID); err != nil {
		return err
	}
	if err := cninames.ValidateNetworkName(network); err != nil {
		return err
	}
	if err := cninames.ValidateInterfaceName(rt.IfName); err != nil {
		return err
	}
	return nil
}

// PluginConfig is one plugin's stdin: its configuration with the list's
// name and cniVersion, prevResult when there is one, and runtimeConfig
// holding the capabilities it declares that rt has values for, which then
// replaces any runtimeConfig of its own, as libcni does.
func PluginConfig(list *netconf.Delegate, p netconf.Plugin, prev types.Result, capabilityArgs map[string]json.RawMessage) ([]byte, error) {
	fields, err := listFields(list, p, 3)
	if err != nil {
		return nil, err
	}
	if prev != nil {
		if fields["prevResult"], err = json.Marshal(prev); err != nil {
			return nil, fmt.Errorf("prevResult: %w", err)
		}
	}
	if rc := runtimeConfig(p.Capabilities, capabilityArgs); rc != nil {
		if fields["runtimeConfig"], err = json.Marshal(rc); err != nil {
			return nil, fmt.Errorf("runtimeConfig: %w", err)
		}
	}
	return json.Marshal(fields)
}

// listFields are a copy of p's fields with the list's name and cniVersion,
// room left for extra more.
func listFields(list *netconf.Delegate, p netconf.Plugin, extra int) (map[string]json.RawMessage, error) {
	fields := make(map[string]json.RawMessage, len(p.Fields)+extra)
	maps.Copy(fields, p.Fields)
	var err error
	if fields["name"], err = json.Marshal(list.Name); err != nil {
		return nil, err
	}
	if fields["cniVersion"], err = json.Marshal(list.CNIVersion); err != nil {
		return nil, err
	}
	return fields, nil
}

func runtimeConfig(declared map[string]bool, values map[string]json.RawMessage) map[string]json.RawMessage {
	var rc map[string]json.RawMessage
	for name, on := range declared {
		v, ok := values[name]
		if !on || !ok {
			continue
		}
		if rc == nil {
			rc = map[string]json.RawMessage{}
		}
		rc[name] = v
	}
	return rc
}

func (c *Chain) env(command string, rt Runtime) []string {
	pairs := make([]string, len(rt.Args))
	for i, kv := range rt.Args {
		pairs[i] = kv[0] + "=" + kv[1]
	}
	env := append(c.environ[:len(c.environ):len(c.environ)],
		"CNI_COMMAND="+command,
		"CNI_CONTAINERID="+rt.ContainerID,
		"CNI_NETNS="+rt.Netns,
		"CNI_ARGS="+strings.Join(pairs, ";"),
		"CNI_IFNAME="+rt.IfName,
		"CNI_PATH="+strings.Join(c.path, string(os.PathListSeparator)),
	)
	return env
}
