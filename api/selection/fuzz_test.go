package selection

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"regexp"
	"strings"
	"testing"
)

// dnsLabel is 3.3's regular expression, checked independently of checkDNSLabel.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", "net-a,net-b,other-ns/net-c", "net-a,net-a", " net-a@net1 , ns/b@net2 ", "a,,b", "/x", "a/b/c@", "{}",
		`[{"name":"net-a"},{"name":"net-b","ips":["1.2.3.4"],"mac":"aa:bb:cc:dd:ee:ff"}]`,
		`[{"name":"net-b","ips":["10.2.2.42/24","2001:db8::5/64"]}]`,
		`[{"name":"net-b","mac":"02:23:45:67:89:01","infiniband-guid":"c2:8f:0a:ff:fe:00:00:01"}]`,
		`[{"name":"net-b","cni-args":{"spoofchk":"on","deviceID":"x"}}]`,
		`[{"name":"net-b","portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp","hostIP":"::1"}]}]`,
		`[{"name":"net-b","bandwidth":{"ingressRate":2048,"ingressBurst":300,"egressRate":8000,"egressBurst":200}}]`,
		`[{"name":"net-b","bandwidth":{"ingressRate":2048, // comment
		}}]`,
		`[{"name":"net-a"},{"name":"net-b","default-route":["10.0.0.1"]},{"name":"c","default-route":[]}]`,
		`[{"name":"a","interface":"net1"},{"name":"b","interface":"net1"},{"name":"c","na\u006de":"d"}]`,
		`[{"name":"a","ip":[],"org.x":{},"Interface":"e\u0000","name":"b"}, 5, null, [], "x"]`,
	} {
		f.Add(seed, podNS)
	}
	f.Add("net-a", "Bad")
	f.Fuzz(func(t *testing.T, value, podNamespace string) {
		checkScanner(t, value)
		sels, err := Parse(value, podNamespace)
		if err != nil {
			checkErrors(t, err, podNamespace)
			return
		}
		checkSelections(t, value, sels)
	})
}

func checkErrors(t *testing.T, err error, podNamespace string) {
	if !dnsLabel.MatchString(podNamespace) || len(podNamespace) > 63 {
		return // the pod namespace error is a plain error
	}
	errs := []error{err}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var fe *FieldError
		if !errors.As(e, &fe) || fe.Reason == "" || fe.Index < -1 {
			t.Fatalf("error %#v is not a complete *FieldError", e)
		}
		if len(fe.Value) > maxShownValue+len("…") {
			t.Fatalf("error value %d bytes long", len(fe.Value))
		}
	}
}

// checkSelections asserts the rules every accepted selection satisfies, with
// checks written apart from the parser's own.
func checkSelections(t *testing.T, value string, sels []Selection) {
	interfaces := map[string]bool{}
	defaultRoutes := 0
	for i, s := range sels {
		for _, label := range []string{s.Name, s.Namespace} {
			if len(label) > 63 || !dnsLabel.MatchString(label) {
				t.Fatalf("selection %d: %q is not a DNS-1123 label", i, label)
			}
		}
		checkAddresses(t, s)
		if s.Interface != "" {
			if !validIfname(s.Interface) || interfaces[s.Interface] {
				t.Fatalf("selection %d: interface %q invalid or repeated", i, s.Interface)
			}
			interfaces[s.Interface] = true
		}
		for key, v := range s.CNIArgs {
			if isDeviceKeyFold(key) || !json.Valid(v) {
				t.Fatalf("selection %d: cni-args %q=%s accepted", i, key, v)
			}
		}
		checkPortMappings(t, s.PortMappings)
		checkBandwidth(t, s.Bandwidth)
		if s.HasDefaultRoute {
			defaultRoutes++
		} else if len(s.DefaultRoute) > 0 {
			t.Fatalf("selection %d: gateways without HasDefaultRoute", i)
		}
	}
	if defaultRoutes > 1 {
		t.Fatalf("%d selections carry default-route", defaultRoutes)
	}
	if trimmed := strings.TrimSpace(value); trimmed != "" && trimmed[0] != '[' && len(sels) != strings.Count(value, ",")+1 {
		t.Fatalf("comma format with %d commas gave %d selections", strings.Count(value, ","), len(sels))
	}
}

func checkAddresses(t *testing.T, s Selection) {
	for _, ip := range s.IPs {
		if net.ParseIP(ip) == nil {
			if _, _, err := net.ParseCIDR(ip); err != nil {
				t.Fatalf("ips %q accepted", ip)
			}
		}
	}
	for _, gw := range s.DefaultRoute {
		if net.ParseIP(gw) == nil {
			t.Fatalf("default-route gateway %q accepted", gw)
		}
	}
	if s.MAC != "" {
		hw, err := net.ParseMAC(s.MAC)
		if err != nil || len(hw) != 6 && len(hw) != 20 || hw.String() != s.MAC {
			t.Fatalf("mac %q accepted", s.MAC)
		}
	}
	if s.InfinibandGUID != "" {
		hw, err := net.ParseMAC(s.InfinibandGUID)
		if err != nil || len(hw) != 8 || hw.String() != s.InfinibandGUID {
			t.Fatalf("infiniband-guid %q accepted", s.InfinibandGUID)
		}
	}
}

func validIfname(name string) bool {
	return len(name) >= 1 && len(name) <= 15 && name != "." && name != ".." &&
		!strings.ContainsAny(name, "/: \t\n\v\f\r\x00%") && !strings.Contains(name, "\xa0")
}

func isDeviceKeyFold(key string) bool {
	lower := strings.ToLower(key)
	return lower == "deviceid" || lower == "pcibusid" || lower == "cnideviceinfofile"
}

func checkPortMappings(t *testing.T, pms []PortMapping) {
	for _, pm := range pms {
		if pm.HostPort < 1 || pm.HostPort > 65535 || pm.ContainerPort < 1 || pm.ContainerPort > 65535 ||
			pm.Protocol != "TCP" && pm.Protocol != "UDP" && pm.Protocol != "SCTP" ||
			pm.HostIP != "" && net.ParseIP(pm.HostIP) == nil {
			t.Fatalf("port mapping %+v accepted", pm)
		}
	}
}

func checkBandwidth(t *testing.T, bw *Bandwidth) {
	if bw == nil {
		return
	}
	if *bw == (Bandwidth{}) || bw.IngressRate < 0 || bw.IngressBurst < 0 || bw.EgressRate < 0 || bw.EgressBurst < 0 ||
		bw.IngressBurst > 0 && bw.IngressRate == 0 || bw.EgressBurst > 0 && bw.EgressRate == 0 {
		t.Fatalf("bandwidth %+v accepted", *bw)
	}
	// The bandwidth plugin needs a burst with every rate and no burst without one.
	rt := bw.Runtime()
	if (rt.IngressRate > 0) != (rt.IngressBurst > 0) || (rt.EgressRate > 0) != (rt.EgressBurst > 0) {
		t.Fatalf("Runtime() of %+v = %+v", *bw, rt)
	}
}

// checkScanner compares the in-place JSON walk with encoding/json on every
// object of an accepted JSON list.
func checkScanner(t *testing.T, value string) {
	var elements []map[string]json.RawMessage
	if json.Unmarshal([]byte(value), &elements) != nil {
		return
	}
	i := 0
	arrayElements([]byte(strings.TrimSpace(value)), func(_ int, raw []byte) {
		walked := map[string]json.RawMessage{}
		objectMembers(raw, func(key, v []byte) { walked[string(key)] = v })
		if !sameMembers(walked, elements[i]) {
			t.Fatalf("element %d: walked %q, encoding/json %q", i, walked, elements[i])
		}
		i++
	})
	if i != len(elements) {
		t.Fatalf("walked %d elements, encoding/json %d", i, len(elements))
	}
}

func sameMembers(a, b map[string]json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(compact(v), compact(b[k])) {
			return false
		}
	}
	return true
}

func compact(raw []byte) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}
