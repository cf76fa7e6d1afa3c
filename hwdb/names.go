package hwdb

import (
	"cmp"
	_ "embed"
	"fmt"
	"io"
	"slices"
	"strings"
)

// pciIDs is the vendor and device part of pci.ids, written by
// internal/gen. Regenerate it from a newer pci.ids with go generate. It is
// embedded as text, not compressed: the names then lie in the binary's
// read-only data, whose pages the kernel reads on demand and may drop,
// instead of 0.7 MiB of heap the agent carries for its life.
//
//go:generate go run ./internal/gen -in /usr/share/misc/pci.ids -out data/pci.ids
//go:embed data/pci.ids
var pciIDs string

// names holds the PCI vendor and device names: the text, and per table the
// sorted keys with the offset of each name in it, which ends at its line's
// end. The tables hold no pointers and no copies, so the agent's heap and
// its collector pay for 8 bytes a name (a map of strings took about 2 MiB
// for pci.ids's 20000), and a lookup allocates nothing.
type names struct {
	text    string
	vendors []nameAt // key: vendor
	devices []nameAt // key: deviceKey(vendor, device)
}

// nameAt is one name: its key and where it starts in the text.
type nameAt struct{ key, off uint32 }

func (n *names) lookup(table []nameAt, key uint32) string {
	i, ok := slices.BinarySearchFunc(table, key, func(e nameAt, key uint32) int { return cmp.Compare(e.key, key) })
	if !ok {
		return ""
	}
	name := n.text[table[i].off:]
	if end := strings.IndexByte(name, '\n'); end >= 0 {
		name = name[:end]
	}
	return name
}

func deviceKey(vendor, device PCIID) uint32 {
	return uint32(vendor)<<16 | uint32(device)
}

// parseNames parses pci.ids text made of comments, blank lines, vendor lines
// ("8086  Intel Corporation") and tab-indented device lines below them. It
// rejects anything else, such as subsystem lines, which internal/gen drops.
func parseNames(text string) (names, error) {
	n := names{
		text: text,
		// Vendors are about a tenth of the lines; a close first guess
		// spares the tables most of their growing.
		vendors: make([]nameAt, 0, strings.Count(text, "\n")/8),
		devices: make([]nameAt, 0, strings.Count(text, "\n\t")),
	}
	var vendor PCIID
	haveVendor := false
	lineNo, off := 0, 0
	for line := range strings.Lines(text) {
		lineNo++
		start := off
		off += len(line)
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		device := line[0] == '\t'
		id, name, ok := parseEntry(strings.TrimPrefix(line, "\t"))
		at := uint32(start + len(line) - len(name))
		switch {
		case !ok || device && !haveVendor:
			return names{}, fmt.Errorf("line %d: %q is not a pci.ids vendor or device line", lineNo, line)
		case device:
			n.devices = append(n.devices, nameAt{deviceKey(vendor, id), at})
		default:
			vendor, haveVendor = id, true
			n.vendors = append(n.vendors, nameAt{uint32(id), at})
		}
	}
	// pci.ids is sorted, but a later line wins over an earlier one of the
	// same key, as a map would have it: stable sort, then keep the last.
	n.vendors, n.devices = lastOfEachKey(n.vendors), lastOfEachKey(n.devices)
	return n, nil
}

// lastOfEachKey sorts the table by key and keeps one entry per key: the
// last of the text.
func lastOfEachKey(table []nameAt) []nameAt {
	slices.SortStableFunc(table, func(a, b nameAt) int { return cmp.Compare(a.key, b.key) })
	out := table[:0]
	for i, e := range table {
		if i+1 < len(table) && table[i+1].key == e.key {
			continue
		}
		out = append(out, e)
	}
	return slices.Clip(out)
}

// parseEntry splits "hhhh  name" into its ID and name.
func parseEntry(s string) (PCIID, string, bool) {
	if len(s) < 7 || s[4:6] != "  " {
		return 0, "", false
	}
	id, ok := parseHex4(s[:4])
	return id, s[6:], ok
}

// VendorName returns the vendor's name from pci.ids, or "" if unknown.
func (db *DB) VendorName(vendor PCIID) string {
	return db.names.lookup(db.names.vendors, uint32(vendor))
}

// DeviceName returns the device's name from pci.ids, or "" if unknown.
func (db *DB) DeviceName(vendor, device PCIID) string {
	return db.names.lookup(db.names.devices, deviceKey(vendor, device))
}

// WritePCIIDs writes the embedded names in pci.ids syntax: the source's
// header comment, vendor lines and tab-indented device lines. Tools that read
// pci.ids, such as ghw through PCIDB_PATH, can use the output. Only the
// tests that check the embedded names against pci.ids call it today.
func (db *DB) WritePCIIDs(w io.Writer) error {
	_, err := io.WriteString(w, db.names.text)
	return err
}
