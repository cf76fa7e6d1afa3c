package cnicache

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/version"
)

// addResult is what the stand-in plugin answers every ADD with.
const addResult = `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","sandbox":"/run/netns/x"}],"ips":[{"address":"10.244.1.2/24","interface":0}]}`

// answeringExec stands in for the plugin binary only: libcni itself
// writes the cache entry, as in the runtime.
type answeringExec struct{}

func (answeringExec) ExecPlugin(_ context.Context, _ string, _ []byte, _ []string) ([]byte, error) {
	return []byte(addResult), nil
}
func (answeringExec) FindInPath(plugin string, _ []string) (string, error) {
	return "/bin/" + plugin, nil
}
func (answeringExec) Decode(data []byte) (version.PluginInfo, error) {
	return version.PluginSupports("1.0.0"), nil
}

// The entry libcni writes after an ADD reads back as the ADD it was: the
// configuration list, CNI_ARGS, runtimeConfig and result, at the path
// Path names.
func TestReadsWhatLibcniWrites(t *testing.T) {
	dir := t.TempDir()
	conf := []byte(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge","capabilities":{"portMappings":true}}]}`)
	list, err := libcni.ConfListFromBytes(conf)
	if err != nil {
		t.Fatal(err)
	}
	rt := &libcni.RuntimeConf{ContainerID: "9a36", NetNS: "/run/netns/x", IfName: "eth0",
		Args:           [][2]string{{"K8S_POD_NAME", "p"}},
		CapabilityArgs: map[string]interface{}{"portMappings": []map[string]any{{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"}}}}
	if _, err := libcni.NewCNIConfigWithCacheDir([]string{"/bin"}, dir, answeringExec{}).AddNetworkList(context.Background(), list, rt); err != nil {
		t.Fatal(err)
	}
	path, err := Path(dir, "podnet", "9a36", "eth0")
	if err != nil {
		t.Fatal(err)
	}
	e, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Matches("podnet", "9a36", "eth0"); err != nil {
		t.Error(err)
	}
	if string(e.Config) != string(conf) || e.NetNS != rt.NetNS || len(e.CNIArgs) != 1 || e.CNIArgs[0] != rt.Args[0] {
		t.Errorf("entry %+v, want the ADD's configuration, netns and CNI_ARGS", e)
	}
	if got := string(e.CapabilityArgs["portMappings"]); got != `[{"containerPort":80,"hostPort":8080,"protocol":"tcp"}]` {
		t.Errorf("portMappings %s", got)
	}
	if got, want := canonical(t, e.Result), canonical(t, []byte(addResult)); got != want {
		t.Errorf("result %s, want %s", got, want)
	}
}

// canonical is data re-encoded with sorted keys.
func canonical(t *testing.T, data []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestDecodeRefuses(t *testing.T) {
	for _, tt := range []struct {
		name, data, want string
	}{
		{"not JSON", `{"kind":`, "unexpected end"},
		{"other kind", `{"kind":"cniCacheV2","config":"e30="}`, `kind "cniCacheV2"`},
		{"no config", `{"kind":"cniCacheV1"}`, "no config"},
		{"config not base64", `{"kind":"cniCacheV1","config":"{}"}`, "illegal base64"},
		{"too large", `{"kind":"cniCacheV1","config":"` + strings.Repeat("A", MaxSize) + `"}`, "over the limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode([]byte(tt.data))
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrMalformed saying %q", err, tt.want)
			}
		})
	}
}

func TestPathRefusesWhatIsNotAFileName(t *testing.T) {
	for _, tt := range []struct{ network, id, ifName, want string }{
		{"podnet", "../x", "eth0", `containerID "../x"`},
		{"", "abc", "eth0", `network ""`},
		{"podnet", "abc", "..", `ifName ".."`},
	} {
		if _, err := Path("/var/lib/cni", tt.network, tt.id, tt.ifName); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Path(%q, %q, %q) err = %v, want one naming %s", tt.network, tt.id, tt.ifName, err, tt.want)
		}
	}
}

func TestReadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "podnet-abc-eth0")
	if err := os.WriteFile(path, []byte(`{"kind":"other"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want ErrMalformed naming %s", err, path)
	}
	if _, err := Read(path + ".missing"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v, want ErrNotExist", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"kind":"cniCacheV1","containerId":"a","config":"e30=","ifName":"eth0","networkName":"n","result":{"cniVersion":"1.0.0"}}`))
	f.Add([]byte(`{"kind":"cniCacheV1","config":null,"capabilityArgs":{"x":1},"cniArgs":[["a","b"]]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		if e.Kind != Kind || len(e.Config) == 0 {
			t.Fatalf("decoded %+v without the kind or a config", e)
		}
	})
}
