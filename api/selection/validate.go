package selection

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

const (
	maxDNSLabel = 63
	// maxIfname is the kernel's IFNAMSIZ (16) less the terminating NUL.
	maxIfname = 15
)

// checkDNSLabel enforces the NetworkAttachmentDefinition naming rule (3.3), which
// is also Kubernetes' rule for namespaces.
func checkDNSLabel(s string) error {
	if s == "" {
		return errors.New("empty; a DNS-1123 label (3.3) needs 1 to 63 characters")
	}
	if len(s) > maxDNSLabel {
		return fmt.Errorf("%d characters; a DNS-1123 label (3.3) has at most 63", len(s))
	}
	for i, r := range s {
		if !isLowerAlnum(r) && r != '-' {
			return fmt.Errorf("not a DNS-1123 label (3.3): %q at offset %d; only lower-case letters, digits and '-' are allowed", r, i)
		}
	}
	if s[0] == '-' || s[len(s)-1] == '-' {
		return errors.New("not a DNS-1123 label (3.3): it must start and end with a lower-case letter or digit")
	}
	return nil
}

func isLowerAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
}

// checkIfname enforces the kernel's dev_valid_name, byte by byte as the kernel
// does, and refuses '%', which makes the kernel pick a name from a template
// (eth%d) instead of using the one asked for.
func checkIfname(s string) error {
	switch {
	case s == "":
		return errors.New("empty; an interface name needs 1 to 15 bytes")
	case len(s) > maxIfname:
		return fmt.Errorf("%d bytes; a Linux interface name has at most 15", len(s))
	case s == "." || s == "..":
		return errors.New("not a valid Linux interface name")
	}
	for i := 0; i < len(s); i++ {
		if problem := ifnameByteProblem(s[i]); problem != "" {
			return fmt.Errorf("not a valid Linux interface name: %s at offset %d", problem, i)
		}
	}
	return nil
}

func ifnameByteProblem(c byte) string {
	switch c {
	case '/', ':':
		return fmt.Sprintf("%q", c)
	case 0:
		return "NUL"
	case '%':
		return "'%' (the kernel would treat the name as a template like eth%d)"
	// The kernel's isspace: the ASCII spaces and Latin-1 no-break space 0xa0,
	// which also occurs inside UTF-8 sequences such as "à".
	case ' ', '\t', '\n', '\v', '\f', '\r', 0xa0:
		return fmt.Sprintf("whitespace byte 0x%02x", c)
	}
	return ""
}

// parseAddr parses a bare IPv4 or IPv6 address. Zones are refused: an address
// assigned to an interface or used as a gateway cannot carry one.
func parseAddr(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, errors.New("not an IPv4 or IPv6 address")
	}
	if addr.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("IPv6 zone %q is not allowed here", addr.Zone())
	}
	return addr, nil
}

// parseAddrPrefix parses an address with an optional prefix length (4.1.2.1.3).
func parseAddrPrefix(s string) (netip.Addr, error) {
	text, bits, hasBits := strings.Cut(s, "/")
	addr, err := parseAddr(text)
	if err != nil || !hasBits {
		return addr, err
	}
	if _, err := netip.ParsePrefix(s); err != nil {
		return netip.Addr{}, fmt.Errorf("prefix length %q is not a number from 0 to %d", bits, addr.BitLen())
	}
	return addr, nil
}

// Hardware address lengths (4.1.2.1.4, RFC 4391 9.1.1, v1.2 "infiniband-guid").
const (
	ethernetAddrLen = 6
	ipoibAddrLen    = 20
	guidLen         = 8
)

// parseMAC parses a 4.1.2.1.4 "mac" into lower-case colon form. For Ethernet it
// also refuses what the kernel refuses as an interface address (is_valid_ether_addr):
// multicast and all-zero addresses.
func parseMAC(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != ethernetAddrLen && len(hw) != ipoibAddrLen {
		return "", errors.New("not a 6-byte Ethernet or 20-byte InfiniBand hardware address")
	}
	if len(hw) == ethernetAddrLen {
		if hw[0]&1 != 0 {
			return "", errors.New("a multicast Ethernet address (first byte odd); an interface needs a unicast address")
		}
		if string(hw) == string(make([]byte, ethernetAddrLen)) {
			return "", errors.New("the all-zero Ethernet address is not a usable interface address")
		}
	}
	return hw.String(), nil
}

// parseGUID parses an "infiniband-guid" into lower-case colon form.
func parseGUID(s string) (string, error) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != guidLen {
		return "", errors.New("not an 8-byte InfiniBand GUID (xx:xx:xx:xx:xx:xx:xx:xx)")
	}
	return hw.String(), nil
}
