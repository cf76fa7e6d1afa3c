package crinet_test

import (
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/cni/crinet"
)

const exampleFile = `
metadata:
  name: sriov-a
  namespace: cnf
  annotations: {k8s.v1.cni.cncf.io/resourceName: intel.com/sriov_a}
ip_ranges: [{cidr: 10.56.0.0/24}]
cniv1_config:
  cni_version: 1.0.0
  plugins:
    - type: sriov
      capabilities: [ips, mac]
      parameters:
        ipam: {type: static}
        vlan: 100
        spoofchk: "off"
`

func TestCRINet_ConfigFile(t *testing.T) {
	cfg, err := crinet.ParseConfigFile([]byte(exampleFile))
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.GetCniv1Config().GetPlugins()[0]
	if cfg.GetMetadata().GetNamespace() != "cnf" || p.GetParameters()["ipam"] != `{"type":"static"}` ||
		p.GetParameters()["vlan"] != "100" || p.GetParameters()["spoofchk"] != "off" || cfg.GetIpRanges()[0].GetCidr() != "10.56.0.0/24" {
		t.Errorf("parsed: %v", cfg)
	}
	tests := []struct{ name, file, want string }{
		{"empty", "", "empty"},
		{"not yaml", "a: [", "not YAML or JSON"},
		{"unknown field", "metadata: {name: a}\nipRange: []", `unknown field "ipRange"`},
		{"parameters not an object", "cniv1_config: {plugins: [{type: x, parameters: [1]}]}", "cniv1_config.plugins[0].parameters: want an object"},
		{"wrong type", "metadata: {generation: -1}", "generation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := crinet.ParseConfigFile([]byte(tt.file))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func FuzzCRINet_ConfigFile(f *testing.F) {
	f.Add([]byte(exampleFile))
	f.Add([]byte(`{"metadata":{"name":"a"},"cniv1Config":{"plugins":[{"type":"x","parameters":{"a":[1,{"b":null}]}}]}}`))
	f.Add([]byte("cniv1_config: {plugins: [null, 1, {parameters: null}]}"))
	v := crinet.Validator{}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := crinet.ParseConfigFile(data)
		if err != nil {
			return
		}
		v.Validate(cfg) // must not panic, whatever the file held
	})
}
