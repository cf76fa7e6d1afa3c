package hwdb

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidPCIID is wrapped by every error that rejects the spelling of a
// PCI ID.
var ErrInvalidPCIID = errors.New("not a 4-digit hex PCI ID")

// ParsePCIID parses a PCI vendor or device ID written as four hex digits,
// with or without a "0x" prefix, in either case, and with surrounding space
// ignored, so it reads sysfs's vendor and device files ("0x8086\n") as they
// are. It does not allocate for valid input.
func ParsePCIID(s string) (PCIID, error) {
	id, ok := parseHex4(strings.TrimSpace(s))
	if !ok {
		return 0, fmt.Errorf("%q is %w", s, ErrInvalidPCIID)
	}
	return id, nil
}

// parseHex4 parses "8086" or "0x8086", in either case.
func parseHex4(s string) (PCIID, bool) {
	if len(s) == 6 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		s = s[2:]
	}
	if len(s) != 4 {
		return 0, false
	}
	var id PCIID
	for i := range 4 {
		d, ok := hexValue(s[i])
		if !ok {
			return 0, false
		}
		id = id<<4 | PCIID(d)
	}
	return id, true
}

func hexValue(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

const hexDigits = "0123456789abcdef"

// String returns the ID as four lower-case hex digits, as pci.ids and sysfs
// (after its "0x") spell it.
func (id PCIID) String() string {
	return string(id.appendHex(make([]byte, 0, 4)))
}

func (id PCIID) appendHex(b []byte) []byte {
	return append(b, hexDigits[id>>12], hexDigits[id>>8&0xf], hexDigits[id>>4&0xf], hexDigits[id&0xf])
}

// MarshalJSON writes the ID as a JSON string of four hex digits, "8086".
func (id PCIID) MarshalJSON() ([]byte, error) {
	b := append(make([]byte, 0, 6), '"')
	return append(id.appendHex(b), '"'), nil
}

// UnmarshalJSON reads a JSON string that ParsePCIID's rules accept, minus
// the surrounding space. A JSON number is rejected rather than guessed at:
// YAML turns an unquoted 8086 into the number 8086 and 0x8086 into 32902, so
// a number no longer says which ID was meant.
func (id *PCIID) UnmarshalJSON(data []byte) error {
	if string(data) == "null" {
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s is %w in quotes (YAML reads an unquoted 8086 or 0x8086 as a number)", data, ErrInvalidPCIID)
	}
	v, ok := parseHex4(s)
	if !ok {
		return fmt.Errorf("%q is %w", s, ErrInvalidPCIID)
	}
	*id = v
	return nil
}
