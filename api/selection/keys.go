package selection

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// want reports whether raw is the JSON type that opens with start, and records
// a type mismatch when it is not.
func (e *element) want(key string, raw []byte, start byte, what string) bool {
	if raw[0] == start {
		return true
	}
	e.typeMismatch(key, raw, what)
	return false
}

func (e *element) typeMismatch(key string, raw []byte, what string) {
	e.fail(key, showJSON(raw), "want %s, found a JSON %s", what, jsonKind(raw))
}

func (e *element) str(key string, raw []byte) (string, bool) {
	if !e.want(key, raw, '"', "a string") {
		return "", false
	}
	return decodeString(raw), true
}

// eachString calls fn with each element of the JSON string array raw; it records
// elements that are not strings and returns the element count, or false when raw
// is not an array.
func (e *element) eachString(key string, raw []byte, fn func(i int, s string, item []byte)) (int, bool) {
	if !e.want(key, raw, '[', "an array of strings") {
		return 0, false
	}
	count := 0
	arrayElements(raw, func(i int, item []byte) {
		count++
		if item[0] != '"' {
			e.typeMismatch(indexKey(key, i), item, "a string")
			return
		}
		fn(i, decodeString(item), item)
	})
	return count, true
}

// indexKey names an array element in an error.
func indexKey(key string, i int) string {
	return fmt.Sprintf("%s[%d]", key, i)
}

func (e *element) hardwareAddr(key string, raw []byte, parse func(string) (string, error)) string {
	s, ok := e.str(key, raw)
	if !ok {
		return ""
	}
	addr, err := parse(s)
	if err != nil {
		e.fail(key, showJSON(raw), "%v", err)
	}
	return addr
}

// parseIPs sets "ips" (4.1.2.1.3): at least one address, each with an optional
// prefix length, none repeated.
func (e *element) parseIPs(key string, raw []byte) {
	var addrs []netip.Addr
	count, ok := e.eachString(key, raw, func(i int, s string, item []byte) {
		addr, err := parseAddrPrefix(s)
		if err != nil {
			e.fail(indexKey(key, i), showJSON(item), "%v", err)
			return
		}
		if first := slices.Index(addrs, addr); first >= 0 {
			e.fail(indexKey(key, i), showJSON(item), "repeats the address of %s[%d]", key, first)
		}
		addrs = append(addrs, addr)
		e.sel.IPs = append(e.sel.IPs, s)
	})
	if ok && count == 0 {
		e.fail(key, showJSON(raw), "must list at least one address (4.1.2.1.3)")
	}
}

// parseDefaultRoute sets "default-route" (4.1.2.1.9): gateway addresses, possibly
// none, on at most one element.
func (e *element) parseDefaultRoute(key string, raw []byte) {
	_, ok := e.eachString(key, raw, func(i int, s string, item []byte) {
		if _, err := parseAddr(s); err != nil {
			e.fail(indexKey(key, i), showJSON(item), "%v", err)
			return
		}
		e.sel.DefaultRoute = append(e.sel.DefaultRoute, s)
	})
	if !ok {
		return
	}
	e.sel.HasDefaultRoute = true
	if first := e.list.defaultRouteAt; first >= 0 {
		e.fail(key, showJSON(raw), "element %d already carries it; only one element may (4.1.2.1.9)", first)
		return
	}
	e.list.defaultRouteAt = e.index
}

// parseCNIArgs sets "cni-args" (4.1.2.1.6), refusing keys that name a device.
func (e *element) parseCNIArgs(key string, raw []byte) {
	if !e.want(key, raw, '{', "an object") {
		return
	}
	args := make(map[string]json.RawMessage)
	objectMembers(raw, func(rawName, value []byte) {
		name := string(rawName)
		memberKey := key + "." + name
		if _, repeated := args[name]; repeated {
			e.fail(memberKey, showJSON(value), "key given more than once")
			return
		}
		if isDeviceKey(name) {
			e.fail(memberKey, showJSON(value), "refused: hwnet picks the device from the pod's allocation, a pod may not name one")
			return
		}
		args[name] = value
	})
	e.sel.CNIArgs = args
}

// isDeviceKey reports keys through which a pod could steer a delegate to a
// device other than the one the device plugin allocated to it.
func isDeviceKey(name string) bool {
	return strings.EqualFold(name, "deviceID") || strings.EqualFold(name, "pciBusID") ||
		strings.EqualFold(name, "CNIDeviceInfoFile")
}

// integer parses a JSON integer into [low, high].
func (e *element) integer(key string, raw []byte, low, high int64) (int64, bool) {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		e.typeMismatch(key, raw, "an integer")
		return 0, false
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		e.fail(key, showJSON(raw), "want an integer, found a number with a fraction or exponent")
	case err != nil || n < low || n > high:
		e.fail(key, showJSON(raw), "%s", rangeText(low, high))
	default:
		return n, true
	}
	return 0, false
}

func rangeText(low, high int64) string {
	if high == math.MaxInt64 {
		return fmt.Sprintf("want an integer of at least %d", low)
	}
	return fmt.Sprintf("want an integer from %d to %d", low, high)
}

// members walks the JSON object raw with fixed keys, recording unknown and
// repeated keys, and returns the keys it passed to fn.
func (e *element) members(key string, raw []byte, known []string, fn func(name, memberKey string, value []byte)) []string {
	var seen []string
	objectMembers(raw, func(rawName, value []byte) {
		name := matchKey(rawName, known)
		if name == "" {
			e.fail(key+"."+string(rawName), showJSON(value), "unknown key%s", suggestion(string(rawName), known))
			return
		}
		memberKey := key + "." + name
		if slices.Contains(seen, name) {
			e.fail(memberKey, showJSON(value), "key given more than once")
			return
		}
		seen = append(seen, name)
		fn(name, memberKey, value)
	})
	return seen
}
