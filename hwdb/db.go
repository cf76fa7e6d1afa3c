package hwdb

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// DB is an opened hardware database. It is safe for concurrent use.
type DB struct {
	names  names
	models []Model             // sorted by vendor, then name
	byPF   map[uint32]int      // deviceKey(vendor, PF) → index in models
	byVF   map[uint32]vfModels // deviceKey(vendor, VF) → models with that VF ID
	byName map[string]int      // nameKey(name) → index in models
}

// vfModels is how many models use one VF ID, and the index of the last one,
// which is the model when there is only one.
type vfModels struct {
	index, count int
}

// Open loads the embedded database and adds the admin's models, which take
// precedence over built-in ones with the same PF vendor and device ID. Open
// copies the models it is given. An extra model that is invalid, or that
// takes the name of a built-in model it does not replace, is an error.
func Open(extra ...Model) (*DB, error) {
	if err := validateModels("extra", extra); err != nil {
		return nil, fmt.Errorf("hwdb: %w", err)
	}
	n, err := parseNames(pciIDs)
	if err != nil {
		return nil, fmt.Errorf("hwdb: embedded pci.ids: %w", err)
	}
	db := &DB{names: n, models: modelTable(extra)}
	if err := db.index(); err != nil {
		return nil, fmt.Errorf("hwdb: %w", err)
	}
	return db, nil
}

// modelTable returns the built-in models, each replaced by the extra model
// with the same PF if there is one, plus the other extra models, sorted by
// vendor, then name.
func modelTable(extra []Model) []Model {
	models := builtinModels()
	at := make(map[uint32]int, len(models))
	for i, m := range models {
		at[deviceKey(m.Vendor, m.PFDevice)] = i
	}
	for _, m := range extra {
		m = cloneModel(m)
		if i, ok := at[deviceKey(m.Vendor, m.PFDevice)]; ok {
			models[i] = m
			continue
		}
		models = append(models, m)
	}
	slices.SortFunc(models, func(a, b Model) int {
		return cmp.Or(cmp.Compare(a.Vendor, b.Vendor), strings.Compare(a.Name, b.Name))
	})
	return models
}

// index builds the lookup maps over db.models.
func (db *DB) index() error {
	db.byPF = make(map[uint32]int, len(db.models))
	db.byVF = make(map[uint32]vfModels, len(db.models))
	db.byName = make(map[string]int, len(db.models))
	for i, m := range db.models {
		name := nameKey(m.Name)
		if j, dup := db.byName[name]; dup {
			other := db.models[j]
			return fmt.Errorf("models %s:%s and %s:%s are both named %q",
				other.Vendor, other.PFDevice, m.Vendor, m.PFDevice, m.Name)
		}
		db.byName[name] = i
		db.byPF[deviceKey(m.Vendor, m.PFDevice)] = i
		if m.VFDevice != 0 {
			vf := deviceKey(m.Vendor, m.VFDevice)
			db.byVF[vf] = vfModels{index: i, count: db.byVF[vf].count + 1}
		}
	}
	return nil
}

// Models returns a copy of every model, sorted by vendor, then name. Only
// tests list them today; it is the database's one view of its whole content.
func (db *DB) Models() []Model {
	models := make([]Model, len(db.models))
	for i, m := range db.models {
		models[i] = cloneModel(m)
	}
	return models
}

// ModelByPF returns the model whose PF has this vendor and device ID. The
// model belongs to the DB and must not be modified.
func (db *DB) ModelByPF(vendor, device PCIID) (*Model, bool) {
	i, ok := db.byPF[deviceKey(vendor, device)]
	if !ok {
		return nil, false
	}
	return &db.models[i], true
}

// ModelByVF returns the model whose VF has this ID when exactly one model
// uses it; n says how many do. Several models share a VF ID (NVIDIA's 101e,
// Intel's 1889), so when n > 1 the model must come from the VF's PF. The
// model belongs to the DB and must not be modified.
func (db *DB) ModelByVF(vendor, device PCIID) (m *Model, n int) {
	vf := db.byVF[deviceKey(vendor, device)]
	if vf.count != 1 {
		return nil, vf.count
	}
	return &db.models[vf.index], 1
}

// ModelByName returns the model with this name, ignoring the case of ASCII
// letters. The model belongs to the DB and must not be modified.
func (db *DB) ModelByName(name string) (*Model, bool) {
	var buf [64]byte // long enough for any sane name, so no allocation
	i, ok := db.byName[string(appendNameKey(buf[:0], name))]
	if !ok {
		return nil, false
	}
	return &db.models[i], true
}

// nameKey is the key under which ModelByName finds a model, and under which
// two names are the same.
func nameKey(name string) string {
	return string(appendNameKey(nil, name))
}

// appendNameKey appends name to dst with ASCII letters lower-cased.
func appendNameKey(dst []byte, name string) []byte {
	for i := range len(name) {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// cloneModel returns m with its own copies of its slices.
func cloneModel(m Model) Model {
	m.PFDrivers = slices.Clone(m.PFDrivers)
	m.VFDrivers = slices.Clone(m.VFDrivers)
	m.LinkTypes = slices.Clone(m.LinkTypes)
	return m
}
