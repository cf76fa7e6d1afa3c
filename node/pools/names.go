package pools

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Kubernetes name limits (k8s.io/apimachinery's validation).
const (
	maxQualifiedNamePart = 63
	maxSubdomain         = 253
	// requestsPrefix is what the API server puts before an extended
	// resource name in a quota; the result must still be a valid name.
	requestsPrefix = "requests."
	maxIfname      = 15 // IFNAMSIZ less the terminating NUL
)

// checkQualifiedNamePart applies Kubernetes' rules for the name part of a
// qualified name, which an extended resource's name after '/' must meet.
func checkQualifiedNamePart(s string) error {
	ok := len(s) > 0 && len(s) <= maxQualifiedNamePart && isAlnum(s[0]) && isAlnum(s[len(s)-1])
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = isAlnum(c) || c == '-' || c == '_' || c == '.'
	}
	if !ok {
		return fmt.Errorf("want at most %d letters, digits, '-', '_' or '.', starting and ending with a letter or digit", maxQualifiedNamePart)
	}
	return nil
}

// checkResourcePrefix checks that prefix is a DNS subdomain that makes an
// extended resource name: not one of Kubernetes' own (kubernetes.io), and
// short enough for its quota name, requests.<prefix>/<name>.
func checkResourcePrefix(prefix string) error {
	if err := checkDNSSubdomain(prefix); err != nil {
		return err
	}
	if len(requestsPrefix)+len(prefix) > maxSubdomain {
		return fmt.Errorf("longer than %d characters", maxSubdomain-len(requestsPrefix))
	}
	if strings.Contains(prefix+"/", "kubernetes.io/") || strings.HasPrefix(prefix, requestsPrefix) {
		return errors.New("reserved by Kubernetes: not an extended resource prefix")
	}
	return nil
}

// checkDNSSubdomain applies Kubernetes' DNS-1123 subdomain rules.
func checkDNSSubdomain(s string) error {
	ok := len(s) > 0 && len(s) <= maxSubdomain
	for label := range strings.SplitSeq(s, ".") {
		ok = ok && label != "" && isLowerAlnum(label[0]) && isLowerAlnum(label[len(label)-1])
		for i := 0; ok && i < len(label); i++ {
			ok = isLowerAlnum(label[i]) || label[i] == '-'
		}
	}
	if !ok {
		return errors.New("not a DNS subdomain (lower-case letters, digits, '-' and '.', such as example.com)")
	}
	return nil
}

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

func isAlnum(c byte) bool { return isLowerAlnum(c) || 'A' <= c && c <= 'Z' }

// parsePCIAddress checks a PCI address as sysfs spells it,
// domain:bus:device.function ("0000:3b:02.1"), and returns it in lower
// case as sysfs does.
func parsePCIAddress(s string) (string, error) {
	bad := fmt.Errorf("not a PCI address such as 0000:3b:02.1 (domain:bus:device.function)")
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return "", bad
	}
	dev, fn, ok := strings.Cut(parts[2], ".")
	if !ok || !isHex(parts[0], 4, 8) || !isHex(parts[1], 2, 2) || !isHex(dev, 2, 2) || !isHex(fn, 1, 1) {
		return "", bad
	}
	if d, _ := strconv.ParseUint(dev, 16, 8); d > 0x1f {
		return "", fmt.Errorf("device %s is out of range 00-1f", dev)
	}
	if fn > "7" {
		return "", fmt.Errorf("function %s is out of range 0-7", fn)
	}
	return strings.ToLower(s), nil
}

// isHex reports whether s is minLen to maxLen hex digits.
func isHex(s string, minLen, maxLen int) bool {
	if len(s) < minLen || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // lower case for letters
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseIfname applies the kernel's dev_valid_name rules, and refuses the
// pattern characters admins write expecting a glob or a regular
// expression: no NIC is named so, and sriovdp matches names exactly.
func parseIfname(s string) (string, error) {
	if s == "" || len(s) > maxIfname || s == "." || s == ".." || strings.ContainsAny(s, "/: \t\n\r\v\f") {
		return "", fmt.Errorf("not an interface name (1-%d characters, no '/', ':' or space)", maxIfname)
	}
	if strings.ContainsAny(s, "*?[]()|^$+\\{}") {
		return "", fmt.Errorf("interface names are matched exactly, not as patterns: list each PF's name")
	}
	return s, nil
}

// parseDriver rejects what cannot be a directory under bus/pci/drivers.
func parseDriver(s string) (string, error) {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, "/ \t\n\x00") {
		return "", errors.New("not a driver name")
	}
	return s, nil
}
