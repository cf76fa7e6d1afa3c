package attachments_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
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

// Attachments lists the runtime's cached attachments of the default
// network and of hwnet, with the pod each was for; another network's
// entries are not theirs. An entry named as theirs that cannot be read is
// an error (whose lease it stands for is unknown), another network's is not.
func TestRuntimeCacheAttachments(t *testing.T) {
	def, err := netconf.Parse([]byte(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"bridge"}]}`), "", "")
	if err != nil {
		t.Fatal(err)
	}
	entry := func(network, id string) string {
		return `{"kind":"cniCacheV1","containerId":"` + id + `","ifName":"eth0","networkName":"` + network + `","config":"e30=",` +
			`"cniArgs":[["K8S_POD_NAMESPACE","ns"],["K8S_POD_NAME","pod-` + id + `"]]}`
	}
	for _, tt := range []struct {
		name    string
		files   map[string]string
		want    []string // container/pod
		wantErr string
	}{
		{"theirs only", map[string]string{"podnet-a-eth0": entry("podnet", "a"), "hwnet-b-eth0": entry("hwnet", "b"),
			"other-c-eth0": entry("other", "c"), "podnet-x-d-eth0": entry("podnet-x", "d")}, []string{"a/pod-a", "b/pod-b"}, ""},
		{"torn entry of the default network", map[string]string{"podnet-a-eth0": entry("podnet", "a"), "podnet-t-eth0": `{"kind":`},
			[]string{"a/pod-a"}, "podnet-t-eth0"},
		{"torn entry of another network", map[string]string{"hwnet-b-eth0": entry("hwnet", "b"), "other-t-eth0": `{"kind":`},
			[]string{"b/pod-b"}, ""},
		{"no cache", nil, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, data := range tt.files {
				if err := os.MkdirAll(filepath.Join(dir, "results"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "results", name), []byte(data), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			got, err := attachments.RuntimeCache{Dir: dir, Own: "hwnet", Default: def}.Attachments()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Attachments: %v, want an error naming %q", err, tt.wantErr)
			}
			var ids []string
			for _, c := range got {
				if c.Written.IsZero() || c.IfName != "eth0" || c.PodNamespace != "ns" {
					t.Errorf("entry %+v: want eth0, namespace ns and the time it was written", c)
				}
				ids = append(ids, c.ContainerID+"/"+c.PodName)
			}
			slices.Sort(ids)
			if !slices.Equal(ids, tt.want) {
				t.Errorf("attachments %v, want %v", ids, tt.want)
			}
		})
	}
}
