package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/pluginconf"
)

// Every CNI version libcni supports works for hwnet's own configuration and
// for the default network's, and the result comes back converted to
// hwnet's (NPWG 7.1; CNI spec "Result" and version conversion).
func TestSpec7_1_EveryCNIVersion(t *testing.T) {
	n := newHarness(t)
	ctx := context.Background()
	versions := version.All.SupportedVersions()
	for _, defVersion := range versions {
		def := filepath.Join(n.dir, "net.d", "10-podnet-"+defVersion+".conflist")
		writeFile(t, def, fmt.Sprintf(`{"cniVersion":%q,"name":"podnet","plugins":[{"type":"hwnet-test-plugin",
  "ipam":{"type":"host-local","subnet":"10.77.0.0/24","dataDir":%q}}]}`, defVersion, filepath.Join(n.dir, "ipam")))
		for _, own := range versions {
			t.Run("default "+defVersion+" hwnet "+own, func(t *testing.T) {
				conf, _ := json.Marshal(pluginconf.Conf{CNIVersion: own, Name: "hwnet", Type: "hwnet",
					CacheDir: filepath.Join(n.dir, "cache"), DefaultNetwork: def})
				req := n.request("ADD", "v-"+defVersion+"-"+own, nil)
				req.Config = conf
				out, err := n.d.Handle(ctx, req)
				if err != nil {
					t.Fatalf("ADD: %v", err)
				}
				res, err := create.Create(own, out)
				if err != nil || res.Version() != own {
					t.Fatalf("result %s is not a %s result: %v", out, own, err)
				}
				req.Command = "DEL"
				if _, err := n.d.Handle(ctx, req); err != nil {
					t.Fatalf("DEL: %v", err)
				}
			})
		}
	}
}
