package pools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"
)

// toJSON returns the config, a JSON or YAML object, as JSON. Input that
// starts with '{' is read as JSON, as sriovdp reads it, so that a mistake
// in it gets the JSON parser's error and position (YAML would forgive
// some, such as trailing commas, and ignore others); anything else is
// YAML.
func toJSON(data []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(data)
	switch {
	case len(trimmed) == 0:
		return nil, errors.New("config is empty")
	case trimmed[0] == '{':
		if !json.Valid(trimmed) {
			return nil, jsonSyntaxError(trimmed)
		}
		return trimmed, nil
	}
	out, err := yaml.YAMLToJSONStrict(trimmed)
	if err != nil {
		return nil, fmt.Errorf("config is neither JSON nor YAML: %w", err)
	}
	if out = bytes.TrimSpace(out); len(out) == 0 || out[0] != '{' {
		return nil, fmt.Errorf("config is %s, not an object with a resourceList", describeJSON(out))
	}
	return out, nil
}

// jsonSyntaxError explains why data is not JSON, with line and column.
func jsonSyntaxError(data []byte) error {
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fmt.Errorf("config is not valid JSON: %w", err)
	}
	line, col := 1, 1
	// Offset counts the offending byte.
	for _, b := range data[:min(int(se.Offset)-1, len(data))] {
		if b == '\n' {
			line, col = line+1, 0
		}
		col++
	}
	return fmt.Errorf("config is not valid JSON: line %d, column %d: %w", line, col, err)
}

// field binds one key of a JSON object to the Go value it decodes into.
type field struct {
	name string
	dst  any
}

// member is one key of a JSON object as written, and its value.
type member struct {
	key   string
	value json.RawMessage
}

// members splits a JSON object into its keys and values, in order.
func members(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %s", describeJSON(raw))
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var m member
		m.key, _ = tok.(string)
		if err := dec.Decode(&m.value); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// decodeObject decodes the JSON object raw into fields. Keys match field
// names as encoding/json (and so sriovdp) matches them: exactly, else
// ignoring case; sriov-network-operator writes "IsRdma" and
// "NeedVhostNet". It returns the names of the fields given, and an error
// per unknown, repeated or mistyped key; path prefixes each key in errors,
// and hint, if not nil, may explain an unknown key.
func decodeObject(raw json.RawMessage, path string, fields []field, hint func(key string) string) (given []string, errs []*FieldError) {
	ms, err := members(raw)
	if err != nil {
		return nil, []*FieldError{{Field: path, Err: err}}
	}
	for _, m := range ms {
		f := lookupField(fields, m.key)
		switch {
		case f == nil:
			errs = append(errs, &FieldError{Field: joinPath(path, m.key), Err: unknownField(hint, m.key)})
		case slices.Contains(given, f.name):
			errs = append(errs, &FieldError{Field: joinPath(path, m.key), Err: errors.New("given twice")})
		default:
			given = append(given, f.name)
			// Into a new value, so that a mistyped field stays unset.
			v := reflect.New(reflect.TypeOf(f.dst).Elem())
			if err := json.Unmarshal(m.value, v.Interface()); err != nil {
				errs = append(errs, &FieldError{Field: joinPath(path, m.key), Value: compact(m.value), Err: typeError(f.dst)})
				continue
			}
			reflect.ValueOf(f.dst).Elem().Set(v.Elem())
		}
	}
	return given, errs
}

func lookupField(fields []field, key string) *field {
	for i := range fields {
		if fields[i].name == key {
			return &fields[i]
		}
	}
	for i := range fields {
		if strings.EqualFold(fields[i].name, key) {
			return &fields[i]
		}
	}
	return nil
}

// unknownField explains an unknown key, with the hint hint gives, if any.
func unknownField(hint func(key string) string, key string) error {
	if hint != nil {
		if h := hint(key); h != "" {
			return fmt.Errorf("unknown field (%s)", h)
		}
	}
	return errors.New("unknown field")
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// typeError says what a field wants, by the type it decodes into.
func typeError(dst any) error {
	switch dst.(type) {
	case *string, **string:
		return errors.New("want a string")
	case *bool:
		return errors.New("want true or false")
	case **int:
		return errors.New("want a whole number")
	case *[]string:
		return errors.New(`want a list of strings (quote PCI IDs in YAML: "8086")`)
	case *[]json.RawMessage:
		return errors.New("want a list")
	case *map[string]map[string]string:
		return errors.New("want an object of objects of strings")
	default:
		return errors.New("want a list or an object")
	}
}

// compact returns raw on one line, cut short when long, for messages.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		b.Reset()
		b.Write(raw)
	}
	const maxLen = 60
	out := b.Bytes()
	if len(out) <= maxLen {
		return string(out)
	}
	cut := maxLen
	for cut > 0 && !utf8.RuneStart(out[cut]) {
		cut--
	}
	return string(out[:cut]) + "..."
}

// describeJSON names the kind of a JSON value for messages.
func describeJSON(raw json.RawMessage) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
