package selection

import (
	"fmt"
	"strings"
)

// suggestion returns ` (did you mean "x"?)` for the candidate closest to an
// unknown key, or "" when none is close: same letters ignoring case, '-' and
// '_'; a well-known synonym from other tools; or a small edit distance.
func suggestion(key string, candidates []string) string {
	if best := closest(key, candidates); best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return ""
}

func closest(key string, candidates []string) string {
	norm := normalizeKey(key)
	for _, c := range candidates {
		if normalizeKey(c) == norm {
			return c
		}
	}
	for _, c := range candidates {
		if synonymOf(norm) == c {
			return c
		}
	}
	best, bestDistance := "", 0
	for _, c := range candidates {
		d := editDistance(norm, normalizeKey(c))
		if d <= maxTypos(c) && (best == "" || d < bestDistance) {
			best, bestDistance = c, d
		}
	}
	return best
}

// maxTypos allows one typo in short keys and two in longer ones: "ip" finds
// "ips", "id" finds nothing.
func maxTypos(candidate string) int {
	if len(candidate) <= 4 {
		return 1
	}
	return 2
}

func normalizeKey(key string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(key))
}

// synonymOf maps the names other tools and CNI itself use for a selection key,
// normalised, to the spec's key.
func synonymOf(norm string) string {
	switch norm {
	case "ifname", "iface", "interfacename", "interfacerequest", "cniifname":
		return "interface"
	case "macaddress", "macaddr", "macrequest", "hwaddr", "hardwareaddr", "hardwareaddress":
		return "mac"
	case "ipaddress", "ipaddresses", "ipaddr", "addresses", "address", "iprequest":
		return "ips"
	case "guid", "ibguid", "nodeguid", "infinibandguidrequest":
		return "infiniband-guid"
	case "args":
		return "cni-args"
	case "ports", "portmapping", "portmap", "portmappingsrequest":
		return "portMappings"
	case "gateway", "gateways", "gatewayrequest", "defaultgateway", "defaultroutes":
		return "default-route"
	case "ns":
		return "namespace"
	case "network", "networkname":
		return "name"
	case "bandwidthrequest":
		return "bandwidth"
	}
	return ""
}

// editDistance is the Levenshtein distance between two short ASCII-ish keys.
func editDistance(a, b string) int {
	previous := make([]int, len(b)+1)
	current := make([]int, len(b)+1)
	for j := range previous {
		previous[j] = j
	}
	for i := 1; i <= len(a); i++ {
		current[0] = i
		for j := 1; j <= len(b); j++ {
			substitution := previous[j-1]
			if a[i-1] != b[j-1] {
				substitution++
			}
			current[j] = min(previous[j]+1, current[j-1]+1, substitution)
		}
		previous, current = current, previous
	}
	return previous[len(b)]
}
