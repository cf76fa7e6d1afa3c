package selection

import (
	"encoding/json"
	"math"
	"testing"
)

func TestRef(t *testing.T) {
	s := Selection{Name: "net-c", Namespace: "other-ns"}
	if got := s.Ref(); got != "other-ns/net-c" {
		t.Fatalf("Ref() = %q, want other-ns/net-c", got)
	}
}

// 4.1.2.1.7.2: runtimeConfig "portMappings" in CONVENTIONS.md form.
func TestSpec4_1_2_1_7_2_RuntimePortMappings(t *testing.T) {
	sels, err := Parse(`[{"name":"net-b","portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"TCP"},
		{"hostPort":53,"containerPort":5353,"protocol":"udp","hostIP":"192.0.2.1"}]}]`, podNS)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(sels[0].RuntimePortMappings())
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"hostPort":8080,"containerPort":80,"protocol":"tcp"},{"hostPort":53,"containerPort":5353,"protocol":"udp","hostIP":"192.0.2.1"}]`
	if string(got) != want {
		t.Fatalf("runtimeConfig portMappings = %s\nwant %s", got, want)
	}
	if sels[0].PortMappings[0].Protocol != "TCP" {
		t.Errorf("RuntimePortMappings changed the selection's protocol to %q", sels[0].PortMappings[0].Protocol)
	}
	if pms := (Selection{}).RuntimePortMappings(); pms != nil {
		t.Errorf("RuntimePortMappings of no mappings = %#v, want nil", pms)
	}
}

// 4.1.2.1.8.2: runtimeConfig "bandwidth", with bursts the bandwidth plugin needs.
func TestSpec4_1_2_1_8_2_BandwidthRuntime(t *testing.T) {
	cases := []struct {
		name string
		in   Bandwidth
		want Bandwidth
		json string
	}{
		{name: "4.1.2.1.8.1 example values pass through",
			in:   Bandwidth{IngressRate: 2048, IngressBurst: 300, EgressRate: 8000, EgressBurst: 200},
			want: Bandwidth{IngressRate: 2048, IngressBurst: 300, EgressRate: 8000, EgressBurst: 200},
			json: `{"ingressRate":2048,"ingressBurst":300,"egressRate":8000,"egressBurst":200}`},
		{name: "ingress rate alone gets 100 ms of burst, egress stays unset",
			in:   Bandwidth{IngressRate: 1_000_000_000},
			want: Bandwidth{IngressRate: 1_000_000_000, IngressBurst: 100_000_000},
			json: `{"ingressRate":1000000000,"ingressBurst":100000000}`},
		{name: "low egress rate gets at least one jumbo frame",
			in:   Bandwidth{EgressRate: 2048},
			want: Bandwidth{EgressRate: 2048, EgressBurst: 9216 * 8},
			json: `{"egressRate":2048,"egressBurst":73728}`},
		{name: "huge rate capped at the bandwidth plugin's 4 GiB burst limit",
			in:   Bandwidth{IngressRate: math.MaxInt64, EgressRate: math.MaxInt64, EgressBurst: 7},
			want: Bandwidth{IngressRate: math.MaxInt64, IngressBurst: 8 * (math.MaxUint32 - 1), EgressRate: math.MaxInt64, EgressBurst: 7},
			json: `{"ingressRate":9223372036854775807,"ingressBurst":34359738352,"egressRate":9223372036854775807,"egressBurst":7}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.in.Runtime()
			if got != tc.want {
				t.Fatalf("Runtime() = %+v, want %+v", got, tc.want)
			}
			for _, pair := range [][2]int64{{got.IngressRate, got.IngressBurst}, {got.EgressRate, got.EgressBurst}} {
				// The reference bandwidth plugin's validateRateAndBurst.
				rate, burst := pair[0], pair[1]
				if (rate != 0) != (burst != 0) || burst/8 >= math.MaxUint32 {
					t.Errorf("rate %d burst %d would be refused by the bandwidth plugin", rate, burst)
				}
			}
			encoded, err := json.Marshal(got)
			if err != nil || string(encoded) != tc.json {
				t.Fatalf("json = %s, %v; want %s", encoded, err, tc.json)
			}
		})
	}
}
