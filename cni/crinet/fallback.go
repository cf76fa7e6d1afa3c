package crinet

import (
	"encoding/json"
	"maps"
	"slices"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// fallbackConfig describes the runtime's default configuration as a
// NetworkConfig named _fallback; nil (none found) gives the bare name.
func fallbackConfig(dl *netconf.Delegate) *crinetapi.NetworkConfig {
	cfg := &crinetapi.NetworkConfig{Metadata: &crinetapi.NetworkMetadata{Name: FallbackName}}
	if dl == nil {
		return cfg
	}
	c := &crinetapi.CNIv1Config{CniVersion: dl.CNIVersion, NetworkName: dl.Name, DisableCheck: dl.DisableCheck}
	for _, p := range dl.Plugins {
		c.Plugins = append(c.Plugins, fallbackPlugin(p))
	}
	cfg.Cniv1Config = c
	return cfg
}

// fallbackPlugin is the inverse of renderPlugin: a string parameter that
// would not read back as JSON is given bare, anything else as JSON.
func fallbackPlugin(p netconf.Plugin) *crinetapi.CNIv1PluginConfig {
	pc := &crinetapi.CNIv1PluginConfig{Type: p.Type, Parameters: map[string]string{}}
	for _, c := range slices.Sorted(maps.Keys(p.Capabilities)) {
		if p.Capabilities[c] {
			pc.Capabilities = append(pc.Capabilities, c)
		}
	}
	for k, raw := range p.Fields {
		if slices.Contains(reservedParameters, k) {
			continue
		}
		var s string
		if json.Unmarshal(raw, &s) == nil && !json.Valid([]byte(s)) {
			pc.Parameters[k] = s
			continue
		}
		pc.Parameters[k] = string(raw)
	}
	return pc
}
