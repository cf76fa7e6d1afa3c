package selection

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// parsePortMappings sets "portMappings" (4.1.2.1.7): at least one mapping.
func (e *element) parsePortMappings(key string, raw []byte) {
	if !e.want(key, raw, '[', "an array of objects") {
		return
	}
	count := 0
	arrayElements(raw, func(i int, item []byte) {
		count++
		if pm, ok := e.portMapping(indexKey(key, i), item); ok {
			e.sel.PortMappings = append(e.sel.PortMappings, pm)
		}
	})
	if count == 0 {
		e.fail(key, showJSON(raw), "must list at least one mapping (4.1.2.1.7)")
	}
}

// portMapping parses one mapping. "hostIP" is not in the spec but is part of
// CONVENTIONS.md's portMappings and honoured by the portmap plugin.
func (e *element) portMapping(key string, raw []byte) (PortMapping, bool) {
	if !e.want(key, raw, '{', "an object") {
		return PortMapping{}, false
	}
	errsBefore := len(e.errs)
	pm := PortMapping{Protocol: "TCP"}
	known := []string{"hostPort", "containerPort", "protocol", "hostIP"}
	seen := e.members(key, raw, known, func(name, memberKey string, value []byte) {
		switch name {
		case "hostPort":
			pm.HostPort = e.port(memberKey, value)
		case "containerPort":
			pm.ContainerPort = e.port(memberKey, value)
		case "protocol":
			pm.Protocol = e.protocol(memberKey, value)
		case "hostIP":
			pm.HostIP = e.hostIP(memberKey, value)
		}
	})
	for _, required := range known[:2] {
		if !slices.Contains(seen, required) {
			e.fail(key+"."+required, "", "required key is missing (4.1.2.1.7)")
		}
	}
	return pm, len(e.errs) == errsBefore
}

func (e *element) port(key string, raw []byte) int {
	n, _ := e.integer(key, raw, 1, math.MaxUint16)
	return int(n)
}

func (e *element) protocol(key string, raw []byte) string {
	s, ok := e.str(key, raw)
	if !ok {
		return ""
	}
	switch upper := strings.ToUpper(s); upper {
	case "TCP", "UDP", "SCTP":
		return upper
	}
	e.fail(key, showJSON(raw), "want TCP, UDP or SCTP, in any case")
	return ""
}

func (e *element) hostIP(key string, raw []byte) string {
	s, ok := e.str(key, raw)
	if !ok {
		return ""
	}
	if _, err := parseAddr(s); err != nil {
		e.fail(key, showJSON(raw), "%v", err)
		return ""
	}
	return s
}

// parseBandwidth sets "bandwidth" (4.1.2.1.8): at least one positive rate or
// burst, and no burst without its rate.
func (e *element) parseBandwidth(key string, raw []byte) {
	if !e.want(key, raw, '{', "an object") {
		return
	}
	var bw Bandwidth
	known := []string{"ingressRate", "ingressBurst", "egressRate", "egressBurst"}
	seen := e.members(key, raw, known, func(name, memberKey string, value []byte) {
		if n, ok := e.integer(memberKey, value, 1, math.MaxInt64); ok {
			*bw.field(name) = n
		}
	})
	if len(seen) == 0 {
		e.fail(key, showJSON(raw), "must set at least one of %s (4.1.2.1.8)", strings.Join(known, ", "))
	}
	for _, pair := range [][2]string{{"ingressRate", "ingressBurst"}, {"egressRate", "egressBurst"}} {
		rate, burst := pair[0], pair[1]
		if *bw.field(burst) != 0 && !slices.Contains(seen, rate) {
			e.fail(key+"."+burst, strconv.FormatInt(*bw.field(burst), 10), "needs %q (4.1.2.1.8)", rate)
		}
	}
	e.sel.Bandwidth = &bw
}

func (b *Bandwidth) field(name string) *int64 {
	switch name {
	case "ingressRate":
		return &b.IngressRate
	case "ingressBurst":
		return &b.IngressBurst
	case "egressRate":
		return &b.EgressRate
	}
	return &b.EgressBurst
}
