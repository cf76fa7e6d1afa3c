package virtualnode

import (
	"fmt"
	"strings"
)

// parseRanges parses a list of indices and inclusive ranges such as
// "0,2-3" (space around elements is allowed) into the sorted set of
// indices it names, each below n. The empty string names no index.
func parseRanges(s string, n int) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	in := make([]bool, n)
	for elem := range strings.SplitSeq(s, ",") {
		elem = strings.TrimSpace(elem)
		if elem == "" {
			return nil, fmt.Errorf("empty element in %q", s)
		}
		lo, hi, err := parseRange(elem)
		if err != nil {
			return nil, err
		}
		if hi >= n {
			return nil, fmt.Errorf("index %d is out of range: vfs is %d", hi, n)
		}
		for i := lo; i <= hi; i++ {
			in[i] = true
		}
	}
	var set []int
	for i, ok := range in {
		if ok {
			set = append(set, i)
		}
	}
	return set, nil
}

// parseRange parses "3" or "2-5".
func parseRange(elem string) (lo, hi int, err error) {
	first, last, isRange := strings.Cut(elem, "-")
	lo, err = parseIndex(first)
	if err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	hi, err = parseIndex(last)
	if err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q is reversed", elem)
	}
	return lo, hi, nil
}

// parseIndex parses a decimal index of at most five digits, so that no
// list can name more than maxVFsPerPF indices.
func parseIndex(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, fmt.Errorf("%q is not an index", s)
	}
	v := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not an index", s)
		}
		v = v*10 + int(c-'0')
	}
	return v, nil
}
