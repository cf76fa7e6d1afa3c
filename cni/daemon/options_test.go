package daemon

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
)

// TestResolved: a missing node name or an unusable kubeconfig is an error
// naming the flag to fix; a given client configuration is kept.
func TestResolved(t *testing.T) {
	given := &rest.Config{Host: "https://api.example:6443"}
	for _, tt := range []struct {
		name string
		o    Options
		want string // in the error; "" for none
	}{
		{"no node name", Options{REST: given}, "--node-name"},
		{"kubeconfig missing", Options{NodeName: "node-1", Kubeconfig: filepath.Join(t.TempDir(), "none")}, "--kubeconfig"},
		{"client given", Options{NodeName: "node-1", REST: given}, ""},
		{"unknown socket group", Options{NodeName: "node-1", REST: given, SocketGroup: "no-such-group-hwnet"}, "--socket-group"},
		{"socket group by GID", Options{NodeName: "node-1", REST: given, SocketGroup: "61234"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := tt.o.Resolved()
			switch {
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Resolved: %v, want an error naming %s", err, tt.want)
			case tt.want == "" && err != nil:
				t.Errorf("Resolved: %v", err)
			case tt.want == "" && r.REST != given:
				t.Errorf("Resolved replaced the given client configuration")
			}
		})
	}
}

// TestConfPath: hwnet's configuration goes to OutputDir when set, else
// beside the default network's in ConfDir.
func TestConfPath(t *testing.T) {
	for _, tt := range []struct {
		o    Options
		want string
	}{
		{Options{}.WithDefaults(), "/etc/cni/net.d/00-hwnet.conflist"},
		{Options{ConfDir: "/c", OutputDir: "/out", ConfFileName: "hwnet.conflist"}, "/out/hwnet.conflist"},
	} {
		if got := tt.o.ConfPath(); got != tt.want {
			t.Errorf("ConfPath of %+v = %s, want %s", tt.o, got, tt.want)
		}
	}
}
