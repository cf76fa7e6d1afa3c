package hwdb

import (
	"fmt"
	"strconv"
	"strings"
)

// ParsePKey reads an InfiniBand partition key, 16 bits in hex with or
// without 0x ("0x7fff", "8001"; surrounding space ignored, as in sysfs's
// "0xffff\n"), and writes it as the kernel's P_Key tables do: 0x and four
// lower-case hex digits. The top bit (full membership) is part of the key.
func ParsePKey(s string) (string, error) {
	digits := strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(s), "0x"), "0X")
	v, err := strconv.ParseUint(digits, 16, 16)
	if err != nil || digits == "" || digits[0] == '+' {
		return "", fmt.Errorf("%q is not a 16-bit hex partition key such as 0x7fff", s)
	}
	return fmt.Sprintf("0x%04x", v), nil
}
