package capture

import (
	"fmt"
	"strings"
)

// scrubber replaces the identifiers that would name a machine (MAC
// addresses, InfiniBand GUIDs and GIDs, switch and port IDs) with made-up
// ones, the same value always by the same one, so that what ties two
// entries together (a representor's switch ID and its PF's, a port GUID in
// its GID) still does.
type scrubber struct {
	made map[string]string
}

func newScrubber() *scrubber { return &scrubber{made: map[string]string{}} }

// value is a file's content with its identifiers replaced, by its name.
func (s *scrubber) value(name, data string) string {
	v := strings.TrimSuffix(data, "\n")
	var out string
	switch {
	case name == "address" || name == "perm_address":
		out = s.hardwareAddr(v)
	case name == "node_guid" || name == "sys_image_guid":
		out = s.guid(v)
	case name == "phys_switch_id" || name == "phys_port_id":
		out = s.hex(v)
	case isGIDPath(name) && len(v) == 39:
		out = v[:20] + s.guid(v[20:])
	default:
		return data
	}
	return out + data[len(v):]
}

// isGIDPath: a port's GID table entries are named by their index.
func isGIDPath(name string) bool {
	return name != "" && strings.Trim(name, "0123456789") == ""
}

// hardwareAddr replaces a MAC, or an IPoIB address's GUID (its last 8
// bytes) keeping its flags, QPN and subnet prefix.
func (s *scrubber) hardwareAddr(v string) string {
	parts := strings.Split(v, ":")
	switch len(parts) {
	case 6:
		return s.made1(v, func(n int) string { return fmt.Sprintf("02:00:5c:%02x:%02x:%02x", n>>16&0xff, n>>8&0xff, n&0xff) })
	case 20:
		guid := strings.Join(parts[12:], "")
		fake := strings.ReplaceAll(s.guid(guid[0:4]+":"+guid[4:8]+":"+guid[8:12]+":"+guid[12:16]), ":", "")
		for i := range 8 {
			parts[12+i] = fake[2*i : 2*i+2]
		}
		return strings.Join(parts, ":")
	}
	return s.hex(v)
}

// guid replaces a GUID in sysfs's form, "0c42:a103:0000:3b00".
func (s *scrubber) guid(v string) string {
	if v == "0000:0000:0000:0000" {
		return v
	}
	return s.made1("guid "+v, func(n int) string { return fmt.Sprintf("0200:5c00:%04x:%04x", n>>16&0xffff, n&0xffff) })
}

// hex replaces any other identifier by one of the same length.
func (s *scrubber) hex(v string) string {
	if v == "" {
		return v
	}
	return s.made1("hex "+v, func(n int) string {
		h := fmt.Sprintf("5c%0*x", max(len(v)-2, 1), n)
		return h[len(h)-len(v):]
	})
}

// made1 is the made-up value of v, made by make from a number of its own
// the first time.
func (s *scrubber) made1(v string, make func(int) string) string {
	if m, ok := s.made[v]; ok {
		return m
	}
	m := make(len(s.made) + 1)
	s.made[v] = m
	return m
}
