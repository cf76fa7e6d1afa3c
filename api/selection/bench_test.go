package selection

import (
	"fmt"
	"strings"
	"testing"
)

// benchAnnotation4 is a realistic SR-IOV pod: four attachments using most keys.
const benchAnnotation4 = `[
  {"name": "sriov-a", "interface": "net1", "ips": ["10.10.1.5/24", "2001:db8:1::5/64"], "mac": "02:00:00:00:10:05"},
  {"name": "sriov-b", "namespace": "fabric", "interface": "net2", "cni-args": {"vlan": 100, "spoofchk": "off"}},
  {"name": "ib-a", "interface": "ib0", "infiniband-guid": "c2:8f:0a:ff:fe:00:00:01"},
  {"name": "mgmt", "default-route": ["10.0.0.1"], "portMappings": [{"hostPort": 8080, "containerPort": 80}],
   "bandwidth": {"ingressRate": 1000000000, "egressRate": 1000000000}}
]`

func benchAnnotation1000() string {
	var b strings.Builder
	b.WriteByte('[')
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"net-%d","interface":"net%d","ips":["10.%d.%d.5/16"],"mac":"02:00:00:00:%02x:%02x"}`,
			i, i, i/256, i%256, i/256, i%256)
	}
	b.WriteByte(']')
	return b.String()
}

func benchmarkParse(b *testing.B, value string) {
	b.SetBytes(int64(len(value)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(value, podNS); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseJSON4(b *testing.B) { benchmarkParse(b, benchAnnotation4) }

func BenchmarkParseJSON1000(b *testing.B) { benchmarkParse(b, benchAnnotation1000()) }

func BenchmarkParseComma1000(b *testing.B) {
	refs := make([]string, 1000)
	for i := range refs {
		refs[i] = fmt.Sprintf("ns-%d/net-%d@net%d", i%7, i, i)
	}
	benchmarkParse(b, strings.Join(refs, ","))
}
