package netconf

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// configList is the wire form Bytes writes; map keys encode sorted, which
// makes the plugin encoding stable.
type configList struct {
	CNIVersion   string                       `json:"cniVersion"`
	Name         string                       `json:"name"`
	DisableCheck bool                         `json:"disableCheck,omitempty"`
	DisableGC    bool                         `json:"disableGC,omitempty"`
	Plugins      []map[string]json.RawMessage `json:"plugins"`
}

// Bytes is the configuration list as JSON: cniVersion, name, disableCheck and
// disableGC when set, and the plugins with every field, keys sorted.
func (d *Delegate) Bytes() ([]byte, error) {
	list := configList{
		CNIVersion:   d.CNIVersion,
		Name:         d.Name,
		DisableCheck: d.DisableCheck,
		DisableGC:    d.DisableGC,
		Plugins:      make([]map[string]json.RawMessage, len(d.Plugins)),
	}
	for i, p := range d.Plugins {
		list.Plugins[i] = p.Fields
	}
	b, err := encode(list)
	if err != nil {
		return nil, withSource(d.Source, fmt.Errorf("encoding configuration list %q: %w", d.Name, err))
	}
	return b, nil
}

// encode marshals without HTML escaping so that values keep the bytes the
// administrator wrote.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
