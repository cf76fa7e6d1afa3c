package netconf

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestAllowedNamespaces: NPWG 7.4, the one rule the agent's ADD and the
// controller's ParamsReady apply, as the flag sets it.
func TestAllowedNamespaces(t *testing.T) {
	tests := []struct {
		name  string
		flag  []string // the flag's values, in order; none: unset
		nadNS string
		want  string // part of the error; "" allowed
	}{
		{"own namespace", nil, "pods", ""},
		{"default namespace allowed by default", nil, "default", ""},
		{"other namespace refused by default", nil, "other-ns", `namespace "pods" may not select NetworkAttachmentDefinitions in namespace "other-ns" (allowed: its own and default; see --cni-allowed-namespaces)`},
		{"admin allows a namespace", []string{"a, other-ns"}, "other-ns", ""},
		{"the list replaces the default", []string{"other-ns"}, "default", `in namespace "default" (allowed: its own and other-ns`},
		{"admin allows every namespace", []string{"*"}, "anything", ""},
		{"empty allows only the own namespace", []string{""}, "default", `namespace "default"`},
		{"own namespace with an empty list", []string{""}, "pods", ""},
		{"the last flag wins", []string{"x", "y"}, "x", `"x"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var allowed AllowedNamespaces
			if tt.flag != nil {
				fs := flag.NewFlagSet("t", flag.ContinueOnError)
				fs.SetOutput(io.Discard)
				fs.Var(&allowed, AllowedNamespacesFlag, AllowedNamespacesUsage)
				var args []string
				for _, v := range tt.flag {
					args = append(args, "--"+AllowedNamespacesFlag+"="+v)
				}
				if err := fs.Parse(args); err != nil {
					t.Fatal(err)
				}
			}
			err := allowed.Check("pods", tt.nadNS)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check(pods, %s) with %v: %v, want allowed", tt.nadNS, tt.flag, err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check(pods, %s) with %v: %v, want an error saying %q", tt.nadNS, tt.flag, err, tt.want)
			}
		})
	}
}
