package hwdb

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
)

// pciIDsGz is the vendor and device part of pci.ids, written by
// internal/gen. Regenerate it from a newer pci.ids with go generate.
//
//go:generate go run ./internal/gen -in /usr/share/misc/pci.ids -out data/pci.ids.gz
//go:embed data/pci.ids.gz
var pciIDsGz []byte

// names holds the PCI vendor and device names. Every name is a substring of
// text, so the maps hold no copies and a lookup allocates nothing.
type names struct {
	text    string
	vendors map[uint32]string // key: vendor
	devices map[uint32]string // key: deviceKey(vendor, device)
}

func deviceKey(vendor, device PCIID) uint32 {
	return uint32(vendor)<<16 | uint32(device)
}

// loadNames decompresses gz and parses it.
func loadNames(gz []byte) (names, error) {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return names{}, err
	}
	var text strings.Builder
	// A gzip stream ends with its uncompressed size; growing to it up front
	// saves the copies of a growing buffer.
	text.Grow(int(binary.LittleEndian.Uint32(gz[len(gz)-4:])))
	if _, err := io.Copy(&text, zr); err != nil {
		return names{}, err
	}
	if err := zr.Close(); err != nil {
		return names{}, err
	}
	return parseNames(text.String())
}

// parseNames parses pci.ids text made of comments, blank lines, vendor lines
// ("8086  Intel Corporation") and tab-indented device lines below them. It
// rejects anything else, such as subsystem lines, which internal/gen drops.
func parseNames(text string) (names, error) {
	n := names{
		text: text,
		// Vendors are about a tenth of the lines; a close first guess
		// spares the maps most of their growing.
		vendors: make(map[uint32]string, strings.Count(text, "\n")/8),
		devices: make(map[uint32]string, strings.Count(text, "\n\t")),
	}
	var vendor PCIID
	haveVendor := false
	lineNo := 0
	for line := range strings.Lines(text) {
		lineNo++
		line = strings.TrimSuffix(line, "\n")
		if line == "" || line[0] == '#' {
			continue
		}
		device := line[0] == '\t'
		id, name, ok := parseEntry(strings.TrimPrefix(line, "\t"))
		switch {
		case !ok || device && !haveVendor:
			return names{}, fmt.Errorf("line %d: %q is not a pci.ids vendor or device line", lineNo, line)
		case device:
			n.devices[deviceKey(vendor, id)] = name
		default:
			vendor, haveVendor = id, true
			n.vendors[uint32(id)] = name
		}
	}
	return n, nil
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
	return db.names.vendors[uint32(vendor)]
}

// DeviceName returns the device's name from pci.ids, or "" if unknown.
func (db *DB) DeviceName(vendor, device PCIID) string {
	return db.names.devices[deviceKey(vendor, device)]
}

// WritePCIIDs writes the embedded names in pci.ids syntax: the source's
// header comment, vendor lines and tab-indented device lines. Tools that read
// pci.ids, such as ghw through PCIDB_PATH, can use the output. Only the
// tests that check the embedded names against pci.ids call it today.
func (db *DB) WritePCIIDs(w io.Writer) error {
	_, err := io.WriteString(w, db.names.text)
	return err
}
