package crinet

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// FallbackName is the reserved name of the runtime's on-disk default
// configuration, listed but read-only.
const FallbackName = "_fallback"

// DefaultNamespace is the namespace of a network whose metadata names none.
const DefaultNamespace = "default"

// ErrInvalid marks a request the API refuses for what it says; its
// message names the field and the value.
var ErrInvalid = errors.New("invalid")

func invalid(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, field, fmt.Sprintf(format, args...))
}

// Key names a managed network: the namespace and name pods select it by.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// checkMetadata validates the network's name, namespace and annotations
// and returns its key.
func checkMetadata(md *crinetapi.NetworkMetadata) (Key, error) {
	if md == nil {
		return Key{}, invalid("config.metadata", "missing; it names the network")
	}
	if md.GetName() == FallbackName {
		return Key{}, invalid("config.metadata.name", "%q is the runtime's on-disk default configuration, read-only through this API", FallbackName)
	}
	if err := checkDNSLabel(md.GetName()); err != nil {
		return Key{}, invalid("config.metadata.name", "%q: %v", md.GetName(), err)
	}
	k := Key{Namespace: md.GetNamespace(), Name: md.GetName()}
	if k.Namespace == "" {
		k.Namespace = DefaultNamespace
	}
	if err := checkDNSLabel(k.Namespace); err != nil {
		return Key{}, invalid("config.metadata.namespace", "%q: %v", k.Namespace, err)
	}
	if r, ok := md.GetAnnotations()[cache.ResourceNameAnnotation]; ok && !validResourceName(r) {
		return Key{}, invalid("config.metadata.annotations["+cache.ResourceNameAnnotation+"]",
			"%q: want a device plugin resource name such as intel.com/sriov_netdevice", r)
	}
	return k, nil
}

func validResourceName(r string) bool {
	domain, name, ok := strings.Cut(r, "/")
	return ok && domain != "" && name != "" && !strings.ContainsAny(name, "/ \t")
}

// checkDNSLabel is the NetworkAttachmentDefinition naming rule (NPWG 3.3),
// which is also Kubernetes' rule for namespaces.
func checkDNSLabel(s string) error {
	switch {
	case s == "":
		return errors.New("empty; a DNS-1123 label needs 1 to 63 characters")
	case len(s) > 63:
		return fmt.Errorf("%d characters; a DNS-1123 label has at most 63", len(s))
	case s[0] == '-' || s[len(s)-1] == '-':
		return errors.New("not a DNS-1123 label: it must start and end with a lower-case letter or digit")
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("not a DNS-1123 label: %q at offset %d; only lower-case letters, digits and '-' are allowed", r, i)
		}
	}
	return nil
}

// checkIPRanges requires each range to be a CIDR naming its network.
func checkIPRanges(ranges []*crinetapi.IPRange) error {
	for i, r := range ranges {
		field := fmt.Sprintf("config.ip_ranges[%d].cidr", i)
		p, err := netip.ParsePrefix(r.GetCidr())
		if err != nil {
			return invalid(field, "%q is not a CIDR such as 10.56.0.0/24 or fd00::/64", r.GetCidr())
		}
		if p.Masked() != p {
			return invalid(field, "%q has host bits set; the range is %s", r.GetCidr(), p.Masked())
		}
	}
	return nil
}

// Validator checks configurations against the plugins installed.
type Validator struct {
	// BinDirs are searched for each plugin's binary, as CNI_PATH is.
	BinDirs []string
}

// Validate checks a configuration and returns its key and its CNI
// configuration list, parsed by netconf as the delegator parses NADs'.
func (v Validator) Validate(cfg *crinetapi.NetworkConfig) (Key, *netconf.Delegate, error) {
	return v.validate(cfg, true)
}

func (v Validator) validate(cfg *crinetapi.NetworkConfig, installed bool) (Key, *netconf.Delegate, error) {
	if cfg == nil {
		return Key{}, nil, invalid("config", "missing")
	}
	if err := checkNetworkSize(cfg); err != nil {
		return Key{}, nil, err
	}
	k, err := checkMetadata(cfg.GetMetadata())
	if err != nil {
		return Key{}, nil, err
	}
	if cfg.GetNetworkType() != crinetapi.NetworkType_CNIv1 {
		return Key{}, nil, invalid("config.network_type", "%d: only CNIv1 (0) is supported", cfg.GetNetworkType())
	}
	if err := checkIPRanges(cfg.GetIpRanges()); err != nil {
		return Key{}, nil, err
	}
	data, err := renderConfList(k, cfg.GetCniv1Config())
	if err != nil {
		return Key{}, nil, err
	}
	dl, err := netconf.Parse(data, k.Name, "")
	if err != nil {
		return Key{}, nil, invalid("config.cniv1_config", "%v", err)
	}
	if !installed {
		return k, dl, nil
	}
	if err := v.checkInstalled(dl); err != nil {
		return Key{}, nil, err
	}
	return k, dl, nil
}

// checkInstalled requires every plugin's binary in one of BinDirs.
func (v Validator) checkInstalled(dl *netconf.Delegate) error {
	for i, p := range dl.Plugins {
		if _, err := v.find(p.Type); err != nil {
			return invalid(fmt.Sprintf("config.cniv1_config.plugins[%d].type", i), "%q: %v", p.Type, err)
		}
	}
	return nil
}

func (v Validator) find(plugin string) (string, error) {
	for _, dir := range v.BinDirs {
		path := filepath.Join(dir, plugin)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path, nil
		}
	}
	return "", fmt.Errorf("no such plugin installed in %s", strings.Join(v.BinDirs, ":"))
}

// reservedParameters are set from the plugin message's own fields.
var reservedParameters = []string{"type", "capabilities", "name", "cniVersion"}

// renderConfList is the CNI configuration list a CNIv1Config describes.
func renderConfList(k Key, c *crinetapi.CNIv1Config) ([]byte, error) {
	if c == nil {
		return nil, invalid("config.cniv1_config", "missing; CNIv1 networks need it")
	}
	if c.GetCniVersion() == "" {
		return nil, invalid("config.cniv1_config.cni_version", `empty; name a CNI version such as "1.0.0"`)
	}
	if len(c.GetPlugins()) == 0 {
		return nil, invalid("config.cniv1_config.plugins", "empty; a network needs at least one plugin")
	}
	name := c.GetNetworkName()
	if name == "" {
		name = k.Name
	}
	plugins := make([]map[string]json.RawMessage, len(c.GetPlugins()))
	for i, p := range c.GetPlugins() {
		fields, err := renderPlugin(fmt.Sprintf("config.cniv1_config.plugins[%d]", i), p)
		if err != nil {
			return nil, err
		}
		plugins[i] = fields
	}
	list := map[string]any{"cniVersion": c.GetCniVersion(), "name": name, "plugins": plugins}
	if c.GetDisableCheck() {
		list["disableCheck"] = true
	}
	return json.Marshal(list)
}

// renderPlugin is one plugin's JSON object: its parameters, each JSON or
// else a string, then type and capabilities.
func renderPlugin(field string, p *crinetapi.CNIv1PluginConfig) (map[string]json.RawMessage, error) {
	if p.GetType() == "" {
		return nil, invalid(field+".type", "empty; it names the plugin binary")
	}
	fields := map[string]json.RawMessage{}
	for key, value := range p.GetParameters() {
		if key == "" || slices.Contains(reservedParameters, key) {
			return nil, invalid(field+".parameters", "key %q is reserved: set by the plugin's or the list's own fields", key)
		}
		fields[key] = parameterValue(value)
	}
	fields["type"], _ = json.Marshal(p.GetType())
	caps := map[string]bool{}
	for j, c := range p.GetCapabilities() {
		if c == "" || caps[c] {
			return nil, invalid(fmt.Sprintf("%s.capabilities[%d]", field, j), "%q: empty or repeated", c)
		}
		caps[c] = true
	}
	if len(caps) > 0 {
		fields["capabilities"], _ = json.Marshal(caps)
	}
	return fields, nil
}

// parameterValue reads a parameter as JSON, or as a plain string when it
// is not JSON: {"ipam": "{\"type\":\"static\"}", "vlan": "100", "master":
// "eth0"} gives an object, a number and a string.
func parameterValue(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	b, _ := json.Marshal(v)
	return b
}
