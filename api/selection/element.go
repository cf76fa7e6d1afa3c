package selection

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// element gathers one list element's selection and problems.
type element struct {
	list  *listParser
	index int
	sel   Selection
	errs  []*FieldError
}

func (e *element) fail(key, shown, format string, args ...any) {
	e.errs = append(e.errs, &FieldError{Key: key, Value: shown, Reason: fmt.Sprintf(format, args...)})
}

// parseObject parses one JSON list element (4.1.2.1).
func (e *element) parseObject(raw []byte) {
	if raw[0] != '{' {
		e.typeMismatch("", raw, `a JSON object such as {"name": "net-a"}`)
		return
	}
	objectMembers(raw, e.member)
	if !slices.Contains(e.list.seenKeys, "name") {
		e.fail("name", "", "required key is missing (4.1.2.1.1)")
	}
}

// knownKeys are the keys 4.1.2.1 defines, plus v1.2's "infiniband-guid", in
// spec order; member dispatches on the same set. An array, so that looking a
// key up allocates nothing.
func knownKeys() [10]string {
	return [...]string{"name", "namespace", "ips", "mac", "infiniband-guid", "interface",
		"cni-args", "portMappings", "bandwidth", "default-route"}
}

// matchKey returns the candidate equal to key, or "".
func matchKey(key []byte, candidates []string) string {
	for _, c := range candidates {
		if string(key) == c {
			return c
		}
	}
	return ""
}

func (e *element) member(rawKey, raw []byte) {
	if bytes.IndexByte(rawKey, '.') >= 0 {
		return // an implementation's extension key (4.1.2.1)
	}
	known := knownKeys()
	key := matchKey(rawKey, known[:])
	if key == "" {
		e.unknownKey(string(rawKey), raw)
		return
	}
	if slices.Contains(e.list.seenKeys, key) {
		e.fail(key, showJSON(raw), "key given more than once")
		return
	}
	e.list.seenKeys = append(e.list.seenKeys, key)
	switch key {
	case "name":
		e.jsonName(key, raw)
	case "namespace":
		e.jsonNamespace(key, raw)
	case "ips":
		e.parseIPs(key, raw)
	case "mac":
		e.sel.MAC = e.hardwareAddr(key, raw, parseMAC)
	case "infiniband-guid":
		e.sel.InfinibandGUID = e.hardwareAddr(key, raw, parseGUID)
	case "interface":
		e.jsonInterface(key, raw)
	case "cni-args":
		e.parseCNIArgs(key, raw)
	case "portMappings":
		e.parsePortMappings(key, raw)
	case "bandwidth":
		e.parseBandwidth(key, raw)
	case "default-route":
		e.parseDefaultRoute(key, raw)
	}
}

func (e *element) unknownKey(key string, raw []byte) {
	if key == "ipam-claim-reference" {
		e.fail(key, showJSON(raw), "an OVN-Kubernetes key outside the NPWG spec; hwnet has no IPAMClaim support")
		return
	}
	known := knownKeys()
	e.fail(key, showJSON(raw), "unknown key%s; keys without a period are reserved by the spec (4.1.2.1), extensions take reverse-domain names like \"org.example.%s\"",
		suggestion(key, known[:]), key)
}

// jsonName sets "name" (4.1.2.1.1), pointing at the right key when the value
// looks like the comma format's "namespace/name@interface".
func (e *element) jsonName(key string, raw []byte) {
	s, ok := e.str(key, raw)
	if !ok {
		return
	}
	if err := checkDNSLabel(s); err != nil {
		e.fail(key, showJSON(raw), "%v%s", err, commaFormHint(s))
		return
	}
	e.sel.Name = s
}

func commaFormHint(name string) string {
	switch {
	case strings.Contains(name, "/"):
		return ` (put the namespace in "namespace")`
	case strings.Contains(name, "@"):
		return ` (put the interface name in "interface")`
	}
	return ""
}

// jsonNamespace sets "namespace" (4.1.2.1.2); empty means the pod's.
func (e *element) jsonNamespace(key string, raw []byte) {
	s, ok := e.str(key, raw)
	if !ok || s == "" {
		return
	}
	if err := checkDNSLabel(s); err != nil {
		e.fail(key, showJSON(raw), "%v", err)
		return
	}
	e.sel.Namespace = s
}

func (e *element) jsonInterface(key string, raw []byte) {
	if s, ok := e.str(key, raw); ok {
		if err := e.setInterface(s); err != nil {
			e.fail(key, showJSON(raw), "%v", err)
		}
	}
}

// setInterface sets the requested interface name, which must be unique in the
// pod (4.1.2.1.5).
func (e *element) setInterface(name string) error {
	if err := checkIfname(name); err != nil {
		return err
	}
	if first, taken := e.list.interfaces[name]; taken {
		return fmt.Errorf("element %d already asks for this interface name (4.1.2.1.5)", first)
	}
	if e.list.interfaces == nil {
		e.list.interfaces = make(map[string]int)
	}
	e.list.interfaces[name] = e.index
	e.sel.Interface = name
	return nil
}

// parseRef parses one comma-format reference (4.1.1): "name" or
// "namespace/name", with Multus's "@interface" suffix as an extension.
func (e *element) parseRef(item string) {
	ref, ifname, hasIfname := strings.Cut(item, "@")
	namespace, name, hasNamespace := strings.Cut(ref, "/")
	if !hasNamespace {
		namespace, name = "", ref
	}
	e.textCheck("name", name, checkDNSLabel(name), &e.sel.Name)
	if hasNamespace {
		e.textCheck("namespace", namespace, checkDNSLabel(namespace), &e.sel.Namespace)
	}
	if hasIfname {
		e.textCheck("interface", ifname, e.setInterface(ifname), nil)
	}
}

// textCheck records a comma-format value: its problem, or into field.
func (e *element) textCheck(key, value string, problem error, field *string) {
	switch {
	case problem != nil:
		e.fail(key, showText(value), "%v", problem)
	case field != nil:
		*field = value
	}
}
