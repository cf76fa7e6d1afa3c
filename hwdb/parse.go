package hwdb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// ParseModels parses an admin's additions to the model table, in JSON or
// YAML: either a list of models or an object whose only field, "models", is
// that list. Field names are Model's JSON names; PCI IDs are strings of four
// hex digits ("8086", "0x8086"), quoted in YAML too. Empty input is no
// models. Every model is validated; an error names the entry by index and
// name, the field and the value, such as
//
//	hwdb: models[2] "X9": field vfDevice: "zz12" is not a 4-digit hex PCI ID
func ParseModels(data []byte) ([]Model, error) {
	// JSON is YAML, so one path reads both; strict mode rejects
	// duplicate keys.
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("hwdb: models: %w", err)
	}
	entries, err := splitEntries(js)
	if err != nil {
		return nil, fmt.Errorf("hwdb: models: %w", err)
	}
	models := make([]Model, len(entries))
	for i, raw := range entries {
		m, err := decodeModel(raw)
		if err != nil {
			return nil, fmt.Errorf("hwdb: %w", entryError("models", i, m.Name, err))
		}
		models[i] = m
	}
	if err := validateModels("models", models); err != nil {
		return nil, fmt.Errorf("hwdb: %w", err)
	}
	return models, nil
}

// splitEntries returns the entries of a models list or {"models": list}.
func splitEntries(js []byte) ([]json.RawMessage, error) {
	var entries []json.RawMessage
	switch js = bytes.TrimSpace(js); {
	case len(js) == 0 || string(js) == "null":
		return nil, nil
	case js[0] == '[':
		if err := json.Unmarshal(js, &entries); err != nil {
			return nil, err
		}
		return entries, nil
	case js[0] == '{':
		var file struct {
			Models []json.RawMessage `json:"models"`
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&file); err != nil {
			return nil, err
		}
		return file.Models, nil
	}
	return nil, fmt.Errorf("%.40s is neither a list of models nor {\"models\": [...]}", js)
}

// decodeModel decodes one entry field by field, so an error can name the
// field and its value. It decodes the name first: even on error, the
// returned model carries the name, if any, for the message.
func decodeModel(raw json.RawMessage) (Model, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return Model{}, fmt.Errorf("%.40s is not a model object", raw)
	}
	var m Model
	if raw, ok := fields["name"]; ok {
		if err := json.Unmarshal(raw, &m.Name); err != nil {
			return m, fieldError("name", raw, &m.Name, err)
		}
		delete(fields, "name")
	}
	targets := m.jsonFields()
	for _, key := range slices.Sorted(maps.Keys(fields)) {
		target, ok := targets[key]
		if !ok {
			return m, fmt.Errorf("unknown field %q (fields are %s)", key, strings.Join(slices.Sorted(maps.Keys(targets)), ", "))
		}
		if err := json.Unmarshal(fields[key], target); err != nil {
			return m, fieldError(key, fields[key], target, err)
		}
	}
	return m, nil
}

// jsonFields maps each JSON field name of Model to the field in m.
func (m *Model) jsonFields() map[string]any {
	return map[string]any{
		"name":      &m.Name,
		"family":    &m.Family,
		"vendor":    &m.Vendor,
		"pfDevice":  &m.PFDevice,
		"vfDevice":  &m.VFDevice,
		"pfDrivers": &m.PFDrivers,
		"vfDrivers": &m.VFDrivers,
		"maxVFs":    &m.MaxVFs,
		"maxSFs":    &m.MaxSFs,
		"linkTypes": &m.LinkTypes,
		"rdma":      &m.RDMA,
		"switchdev": &m.Switchdev,
		"vdpa":      &m.VDPA,
		"dpdk":      &m.DPDK,
		"class":     &m.Class,
	}
}

// fieldError explains why value does not decode into target. PCIID's own
// errors already show the value.
func fieldError(field string, value json.RawMessage, target any, err error) error {
	var typeErr *json.UnmarshalTypeError
	if !errors.As(err, &typeErr) {
		return fmt.Errorf("field %s: %w", field, err)
	}
	var want string
	switch target.(type) {
	case *int:
		want = "a whole number"
	case *bool:
		want = "true or false"
	case *[]string, *[]LinkType:
		want = "a list of strings"
	default:
		// YAML reads an unquoted y, no or 42 as a boolean or number.
		want = "a string (quote it in YAML)"
	}
	return fmt.Errorf("field %s: %.40s is not %s", field, value, want)
}

func entryError(list string, i int, name string, err error) error {
	return fmt.Errorf("%s[%d] %q: %w", list, i, name, err)
}

// validateModels checks each model and that no two share a name (as
// ModelByName sees it) or a PF. list names the slice in errors: "models[2]".
func validateModels(list string, models []Model) error {
	byName := make(map[string]int, len(models))
	byPF := make(map[uint32]int, len(models))
	for i, m := range models {
		if err := validateModel(m); err != nil {
			return entryError(list, i, m.Name, err)
		}
		name := nameKey(m.Name)
		if j, dup := byName[name]; dup {
			return entryError(list, i, m.Name, fmt.Errorf("field name: %q is also the name of %s[%d]", m.Name, list, j))
		}
		pf := deviceKey(m.Vendor, m.PFDevice)
		if j, dup := byPF[pf]; dup {
			return entryError(list, i, m.Name, fmt.Errorf("field pfDevice: %q is also the PF of %s[%d] %q", m.PFDevice, list, j, models[j].Name))
		}
		byName[name], byPF[pf] = i, i
	}
	return nil
}

// validateModel checks the fields of one model, in the order Model declares
// them, and reports the first bad one.
func validateModel(m Model) error {
	switch {
	case strings.TrimSpace(m.Name) == "":
		return fmt.Errorf("field name: %q is empty", m.Name)
	case m.Vendor == 0:
		return errors.New(`field vendor: missing or "0000"`)
	case m.PFDevice == 0:
		return errors.New(`field pfDevice: missing or "0000"`)
	}
	if err := validateDrivers("pfDrivers", m.PFDrivers); err != nil {
		return err
	}
	if err := validateDrivers("vfDrivers", m.VFDrivers); err != nil {
		return err
	}
	if m.MaxVFs < 0 {
		return fmt.Errorf("field maxVFs: %d is negative", m.MaxVFs)
	}
	if m.MaxSFs < 0 || m.MaxSFs > maxSFsPerPF {
		return fmt.Errorf("field maxSFs: %d is out of range 0-%d", m.MaxSFs, maxSFsPerPF)
	}
	for i, t := range m.LinkTypes {
		if t != Ethernet && t != InfiniBand {
			return fmt.Errorf("field linkTypes[%d]: %q is not a link type (%s, %s)", i, t, Ethernet, InfiniBand)
		}
	}
	if m.DPDK != "" && m.DPDK != VFIO && m.DPDK != Bifurcated {
		return fmt.Errorf("field dpdk: %q is not a DPDK binding (%s, %s, or none)", m.DPDK, VFIO, Bifurcated)
	}
	return nil
}

func validateDrivers(field string, drivers []string) error {
	for i, d := range drivers {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("field %s[%d]: %q is empty", field, i, d)
		}
	}
	return nil
}

// OpenFile opens the database with the models of the file at path added,
// as Open does; "" adds none. Errors name the file.
func OpenFile(path string) (*DB, error) {
	if path == "" {
		return Open()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	models, err := ParseModels(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return Open(models...)
}
