package netconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// Delegate is a CNI configuration list as hwnet will run it.
type Delegate struct {
	Name, CNIVersion        string
	DisableCheck, DisableGC bool
	Plugins                 []Plugin
	// Source is where the configuration came from, for errors and
	// `hwnetctl explain`: "NetworkAttachmentDefinition ns/name spec.config"
	// or a file path.
	Source string
}

// Plugin is one entry of a configuration list. Fields is authoritative and is
// what Bytes encodes; Type and Capabilities are decoded from it for reading.
type Plugin struct {
	Type         string
	Capabilities map[string]bool
	// Fields holds every top-level key as given, so re-encoding loses nothing.
	Fields map[string]json.RawMessage
}

// unspecifiedVersion is the version the CNI specification assigns to a
// configuration without "cniVersion".
const unspecifiedVersion = "0.1.0"

// excerptLen bounds how much of a bad value an error quotes.
const excerptLen = 48

// Parse reads a CNI conf or conflist. When the JSON has no "name", nadName is
// used (NPWG 3.4.2); a conf becomes a one-plugin list keeping its cniVersion.
// source is recorded in the Delegate and prefixes every error.
func Parse(data []byte, nadName, source string) (*Delegate, error) {
	d, err := parse(data, nadName)
	if err != nil {
		return nil, withSource(source, err)
	}
	d.Source = source
	return d, nil
}

func withSource(source string, err error) error {
	if source == "" {
		return err
	}
	return fmt.Errorf("%s: %w", source, err)
}

func parse(data []byte, nadName string) (*Delegate, error) {
	doc, top, err := decodeDocument(data)
	if err != nil {
		return nil, err
	}
	d := &Delegate{}
	if d.Name, err = nameOf(top, nadName); err != nil {
		return nil, err
	}
	if d.CNIVersion, err = versionOf(top); err != nil {
		return nil, err
	}
	if d.DisableCheck, err = flagOf(top, "disableCheck"); err != nil {
		return nil, err
	}
	if d.DisableGC, err = flagOf(top, "disableGC"); err != nil {
		return nil, err
	}
	if d.Plugins, err = pluginsOf(doc, top); err != nil {
		return nil, err
	}
	return d, nil
}

// decodeDocument compacts the document first so that raw field values are
// canonical up to key order: a Delegate re-parsed from Bytes is identical.
func decodeDocument(data []byte) (json.RawMessage, map[string]json.RawMessage, error) {
	if !utf8.Valid(data) {
		return nil, nil, errors.New("config is not valid UTF-8")
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err != nil {
		return nil, nil, fmt.Errorf("config is not valid JSON: %w", err)
	}
	top, err := objectOf(compact.Bytes(), "config")
	return compact.Bytes(), top, err
}

func objectOf(raw json.RawMessage, field string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("%s: want a JSON object, got %s", field, excerpt(raw))
	}
	return obj, nil
}

func excerpt(raw []byte) string {
	if len(raw) <= excerptLen {
		return string(raw)
	}
	return strings.ToValidUTF8(string(raw[:excerptLen]), "") + "..."
}

// decodeField decodes fields[key] into v; an absent or null value leaves v
// untouched.
func decodeField(fields map[string]json.RawMessage, path, key, want string, v any) error {
	raw, ok := fields[key]
	if !ok {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s%s: want %s, got %s", path, key, want, excerpt(raw))
	}
	return nil
}

func nameOf(top map[string]json.RawMessage, nadName string) (string, error) {
	var name string
	if err := decodeField(top, "", "name", "a string", &name); err != nil {
		return "", err
	}
	switch {
	case name != "":
		return name, nil
	case nadName != "":
		return nadName, nil
	}
	return "", errors.New(`name: missing, and there is no NetworkAttachmentDefinition name to use instead`)
}

// versionOf picks the configuration's CNI version as libcni does: the newest
// of "cniVersion" and "cniVersions" this libcni supports. Unlike libcni it
// refuses a configuration none of whose versions is supported, so the
// operator learns it here rather than from a failing plugin.
func versionOf(top map[string]json.RawMessage) (string, error) {
	var single string
	var listed []string
	if err := decodeField(top, "", "cniVersion", "a string", &single); err != nil {
		return "", err
	}
	if err := decodeField(top, "", "cniVersions", "an array of strings", &listed); err != nil {
		return "", err
	}
	candidates := slices.Clip(listed)
	if single != "" {
		candidates = append(candidates, single)
	}
	if len(candidates) == 0 {
		return unspecifiedVersion, nil
	}
	supported := version.All.SupportedVersions()
	newest := ""
	for _, v := range candidates {
		if slices.Contains(supported, v) && (newest == "" || newer(v, newest)) {
			newest = v
		}
	}
	if newest != "" {
		return newest, nil
	}
	if len(listed) == 0 {
		return "", fmt.Errorf("cniVersion: %q is not supported; libcni supports %s", single, strings.Join(supported, ", "))
	}
	return "", fmt.Errorf("cniVersions: none of %q (cniVersion %q) is supported; libcni supports %s",
		listed, single, strings.Join(supported, ", "))
}

// newer compares two versions already known to be valid.
func newer(v, than string) bool {
	gt, err := version.GreaterThan(v, than)
	return err == nil && gt
}

// flagOf reads a boolean list key, accepting the "true"/"false" strings
// libcni accepts.
func flagOf(top map[string]json.RawMessage, key string) (bool, error) {
	raw, ok := top[key]
	if !ok {
		return false, nil
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return b, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, fmt.Errorf("%s: want true or false, got %s", key, excerpt(raw))
}

func pluginsOf(doc json.RawMessage, top map[string]json.RawMessage) ([]Plugin, error) {
	rawPlugins, isList := top["plugins"]
	_, isConf := top["type"]
	switch {
	case isList && isConf:
		return nil, errors.New(`both "type" (a conf) and "plugins" (a conflist) are set; use one`)
	case isConf:
		conf, err := decodeAsLibcni(doc, top, "")
		if err != nil {
			return nil, err
		}
		p, err := newPlugin(top, conf, "")
		if err != nil {
			return nil, err
		}
		return []Plugin{p}, nil
	case !isList:
		return nil, errors.New(`neither "type" (a conf) nor "plugins" (a conflist) is set`)
	}
	return listPlugins(rawPlugins)
}

func listPlugins(rawPlugins json.RawMessage) ([]Plugin, error) {
	// One decoding of the whole array each way is much cheaper than one per
	// plugin; locatePluginError does the per-plugin work only on failure.
	var fieldsList []map[string]json.RawMessage
	var confs []types.PluginConf
	if json.Unmarshal(rawPlugins, &fieldsList) != nil || json.Unmarshal(rawPlugins, &confs) != nil {
		return nil, locatePluginError(rawPlugins)
	}
	if len(fieldsList) == 0 {
		return nil, errors.New("plugins: empty; a conflist needs at least one plugin")
	}
	plugins := make([]Plugin, len(fieldsList))
	for i, fields := range fieldsList {
		path := fmt.Sprintf("plugins[%d]", i)
		if fields == nil {
			return nil, fmt.Errorf("%s: want a JSON object, got null", path)
		}
		var err error
		if plugins[i], err = newPlugin(fields, &confs[i], path+"."); err != nil {
			return nil, err
		}
	}
	return plugins, nil
}

// locatePluginError names the plugin that makes a plugins array undecodable.
func locatePluginError(rawPlugins json.RawMessage) error {
	var raws []json.RawMessage
	if err := json.Unmarshal(rawPlugins, &raws); err != nil {
		return fmt.Errorf("plugins: want an array of plugin objects, got %s", excerpt(rawPlugins))
	}
	for i, raw := range raws {
		path := fmt.Sprintf("plugins[%d]", i)
		fields, err := objectOf(raw, path)
		if err != nil {
			return err
		}
		if _, err := decodeAsLibcni(raw, fields, path+"."); err != nil {
			return err
		}
	}
	return fmt.Errorf("plugins: cannot decode %s", excerpt(rawPlugins))
}

// newPlugin checks one plugin given its fields and libcni's reading of them;
// path prefixes field names in errors.
func newPlugin(fields map[string]json.RawMessage, conf *types.PluginConf, path string) (Plugin, error) {
	if err := rejectCaseVariants(fields, path); err != nil {
		return Plugin{}, err
	}
	if conf.Type == "" {
		return Plugin{}, fmt.Errorf("%stype: missing; it names the plugin binary to run", path)
	}
	if strings.ContainsRune(conf.Type, os.PathSeparator) {
		return Plugin{}, fmt.Errorf("%stype: %q is a path; it must name a binary in the CNI bin directory", path, conf.Type)
	}
	// Capabilities as the last "capabilities" key gives them, as Bytes
	// re-encodes them: libcni's reading merges a repeated key's objects.
	var caps map[string]bool
	if err := decodeField(fields, path, "capabilities", "an object of booleans", &caps); err != nil {
		return Plugin{}, err
	}
	return Plugin{Type: conf.Type, Capabilities: caps, Fields: fields}, nil
}

// decodeAsLibcni decodes a plugin into types.PluginConf as libcni will before
// running it (type, capabilities, ipam, dns, prevResult...), so that a
// configuration libcni would refuse at attach time is refused here, naming
// the field and its value.
func decodeAsLibcni(raw json.RawMessage, fields map[string]json.RawMessage, path string) (*types.PluginConf, error) {
	var conf types.PluginConf
	err := json.Unmarshal(raw, &conf)
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return &conf, nil
	case !errors.As(err, &typeErr):
		return nil, fmt.Errorf("%s%w", path, err)
	}
	want := jsonKind(typeErr.Type.Kind())
	// Field is a dotted path; find the top-level key it starts with, which
	// may itself contain dots ("cni.dev/valid-attachments").
	key := typeErr.Field
	value, ok := fields[key]
	for !ok && strings.Contains(key, ".") {
		key = key[:strings.LastIndex(key, ".")]
		value, ok = fields[key]
	}
	switch {
	case !ok: // the key is spelled in another case
		return nil, fmt.Errorf("%s%s: want %s, got a JSON %s", path, typeErr.Field, want, typeErr.Value)
	case key != typeErr.Field:
		return nil, fmt.Errorf("%s%s: want %s, got a JSON %s in %s", path, typeErr.Field, want, typeErr.Value, excerpt(value))
	case !strings.HasPrefix(typeErr.Value, valueKind(value)):
		return nil, fmt.Errorf("%s%s: want %s for each entry, got a JSON %s in %s", path, key, want, typeErr.Value, excerpt(value))
	}
	return nil, fmt.Errorf("%s%s: want %s, got %s", path, key, want, excerpt(value))
}

// valueKind names a JSON value's kind as json.UnmarshalTypeError.Value does.
func valueKind(raw json.RawMessage) string {
	switch raw[0] {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// rejectCaseVariants refuses keys such as "Type" or "CAPABILITIES": libcni
// decodes a plugin into a Go struct, which matches keys case-insensitively,
// so such a key could make libcni run or filter for something other than what
// Check and `hwnetctl explain` report.
func rejectCaseVariants(fields map[string]json.RawMessage, path string) error {
	for key := range fields {
		for _, canonical := range []string{"type", "capabilities"} {
			if key != canonical && strings.EqualFold(key, canonical) {
				return fmt.Errorf("%s%s: libcni would read it as %q; spell it %q", path, key, canonical, canonical)
			}
		}
	}
	return nil
}

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	}
	return "a number"
}
