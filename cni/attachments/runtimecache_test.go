package attachments_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// An entry of the runtime's cache that cannot be used (torn, another
// container's under this one's name) runs no DEL and fails none: it is
// said, and the DEL of a container hwnet keeps no record of succeeds, so
// the pod is not left Terminating at every retry.
func TestRuntimeCacheEntryThatCannotBeUsed(t *testing.T) {
	def, err := netconf.Parse([]byte(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"not-installed"}]}`), "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ name, entry, want string }{
		{"torn", `{"kind":"cniCacheV1","con`, "malformed libcni cache entry"},
		{"another container's", `{"kind":"cniCacheV1","containerId":"other","ifName":"eth0","networkName":"podnet","config":"e30="}`, `container "other"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "results"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "results", "podnet-c1-eth0"), []byte(tt.entry), 0o600); err != nil {
				t.Fatal(err)
			}
			var warned []error
			rc := attachments.RuntimeCache{Dir: dir, Own: "hwnet", Default: def}
			rt := chain.Runtime{ContainerID: "c1", IfName: "eth0"}
			deleted, err := rc.Delete(context.Background(), chain.New(nil, nil, nil), rt, func(err error) { warned = append(warned, err) })
			if deleted || err != nil {
				t.Fatalf("Delete = %v, %v; want nothing deleted and no error", deleted, err)
			}
			if err := errors.Join(warned...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("warned %v, want one saying %s", err, tt.want)
			}
		})
	}
}
