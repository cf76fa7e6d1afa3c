package crinet

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"sigs.k8s.io/yaml"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
)

// ParseConfigFile reads a NetworkConfig from YAML or JSON, in protobuf's
// JSON mapping (field names as in the .proto or in lowerCamelCase). Plugin
// parameters may be given as any YAML or JSON value: one that is not a
// string is passed on as its JSON text, so `ipam: {type: static}` and
// `vlan: 100` need no quoting. Unknown fields are refused.
func ParseConfigFile(data []byte) (*crinetapi.NetworkConfig, error) {
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	if doc == nil {
		return nil, fmt.Errorf("empty: want a NetworkConfig object with metadata and cniv1_config")
	}
	if err := stringifyParameters(doc); err != nil {
		return nil, err
	}
	normalised, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	cfg := &crinetapi.NetworkConfig{}
	if err := protojson.Unmarshal(normalised, cfg); err != nil {
		return nil, fmt.Errorf("not a NetworkConfig: %w", err)
	}
	return cfg, nil
}

// stringifyParameters turns every non-string plugin parameter into its
// JSON text.
func stringifyParameters(doc map[string]any) error {
	c, _ := either(doc, "cniv1_config", "cniv1Config").(map[string]any)
	plugins, _ := c["plugins"].([]any)
	for i, p := range plugins {
		plugin, _ := p.(map[string]any)
		params, ok := plugin["parameters"].(map[string]any)
		if plugin["parameters"] != nil && !ok {
			return fmt.Errorf("cniv1_config.plugins[%d].parameters: want an object of parameters", i)
		}
		for k, v := range params {
			if _, isString := v.(string); isString {
				continue
			}
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("cniv1_config.plugins[%d].parameters.%s: %w", i, k, err)
			}
			params[k] = string(b)
		}
	}
	return nil
}

func either(m map[string]any, keys ...string) any {
	for _, k := range keys {
		if v, ok := m[k]; ok {
			return v
		}
	}
	return nil
}
