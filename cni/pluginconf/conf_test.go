package pluginconf_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/cni/pluginconf"
)

func TestSpecNetworkConfiguration_Parse(t *testing.T) {
	const sock, cache, rcache = "/run/hwnet/cni.sock", "/var/lib/hwnet/cni", "/var/lib/cni"
	wait := pluginconf.Duration(30 * time.Second)
	tests := []struct {
		name     string
		json     string
		want     pluginconf.Conf
		wantCode uint
		wantMsg  string
	}{
		{name: "defaults", json: `{"cniVersion":"1.1.0","name":"hwnet","type":"hwnet","capabilities":{"portMappings":true}}`,
			want: pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet", SocketPath: sock, CacheDir: cache, RuntimeCacheDir: rcache,
				AgentWait: wait, Capabilities: map[string]bool{"portMappings": true}}},
		{name: "every field set", json: `{"cniVersion":"0.4.0","name":"k8s-pod-network","type":"hwnet","socketPath":"/x/a.sock","cacheDir":"/x/cache","runtimeCacheDir":"/x/cni","agentWait":"1m30s","defaultNetwork":"/etc/cni/net.d/10-calico.conflist"}`,
			want: pluginconf.Conf{CNIVersion: "0.4.0", Name: "k8s-pod-network", Type: "hwnet", SocketPath: "/x/a.sock", CacheDir: "/x/cache", RuntimeCacheDir: "/x/cni",
				AgentWait: pluginconf.Duration(90 * time.Second), DefaultNetwork: "/etc/cni/net.d/10-calico.conflist"}},
		{name: "no cniVersion means 0.1.0, agentWait 0s means do not wait", json: `{"name":"n","agentWait":"0s"}`,
			want: pluginconf.Conf{Name: "n", SocketPath: sock, CacheDir: cache, RuntimeCacheDir: rcache}},
		{name: "agentWait null means the default", json: `{"name":"n","agentWait":null}`,
			want: pluginconf.Conf{Name: "n", SocketPath: sock, CacheDir: cache, RuntimeCacheDir: rcache, AgentWait: wait}},
		{name: "empty socketPath and cacheDir mean the defaults", json: `{"name":"n","socketPath":"","cacheDir":""}`,
			want: pluginconf.Conf{Name: "n", SocketPath: sock, CacheDir: cache, RuntimeCacheDir: rcache, AgentWait: wait}},
		{name: "prevResult is the agent's, runtimeConfig kept raw", json: `{"cniVersion":"1.0.0","name":"n","prevResult":{"cniVersion":"1.0.0"},"runtimeConfig":{"mac":"x"}}`,
			want: pluginconf.Conf{CNIVersion: "1.0.0", Name: "n", SocketPath: sock, CacheDir: cache, RuntimeCacheDir: rcache, AgentWait: wait,
				RuntimeConfig: map[string]json.RawMessage{"mac": json.RawMessage(`"x"`)}}},
		{name: "unknown cniVersion", json: `{"cniVersion":"2.0.0","name":"n"}`,
			wantCode: types.ErrIncompatibleCNIVersion, wantMsg: "incompatible CNI versions"},
		{name: "no name", json: `{"cniVersion":"1.0.0"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: "missing network name"},
		{name: "name with invalid characters", json: `{"cniVersion":"1.0.0","name":"a b"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: "invalid characters"},
		{name: "bad agentWait", json: `{"name":"n","agentWait":"soon"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: `invalid "agentWait" "soon"`},
		{name: "negative agentWait", json: `{"name":"n","agentWait":"-1s"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: `invalid "agentWait" "-1s"`},
		{name: "agentWait not a string", json: `{"name":"n","agentWait":30}`,
			wantCode: types.ErrDecodingFailure, wantMsg: "agentWait"},
		{name: "relative socketPath", json: `{"name":"n","socketPath":"cni.sock"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: `invalid "socketPath" "cni.sock": want an absolute path`},
		{name: "relative cacheDir", json: `{"name":"n","cacheDir":"cache"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: `invalid "cacheDir" "cache"`},
		{name: "relative runtimeCacheDir", json: `{"name":"n","runtimeCacheDir":"var/lib/cni"}`,
			wantCode: types.ErrInvalidNetworkConfig, wantMsg: `invalid "runtimeCacheDir" "var/lib/cni"`},
		{name: "socketPath not a string", json: `{"name":"n","socketPath":5}`,
			wantCode: types.ErrDecodingFailure, wantMsg: "socketPath"},
		{name: "not JSON", json: `{"name":`,
			wantCode: types.ErrDecodingFailure, wantMsg: "hwnet network configuration"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := pluginconf.Parse([]byte(tc.json))
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if !reflect.DeepEqual(*conf, tc.want) {
					t.Errorf("conf = %+v, want %+v", *conf, tc.want)
				}
				return
			}
			var cerr *types.Error
			if !errors.As(err, &cerr) || cerr.Code != tc.wantCode || !strings.Contains(cerr.Msg, tc.wantMsg) {
				t.Fatalf("error = %#v, want code %d containing %q", err, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

// TestSpecNetworkConfiguration_Version: an absent cniVersion means 0.1.0.
func TestSpecNetworkConfiguration_Version(t *testing.T) {
	for _, tc := range []struct{ cniVersion, want string }{{"", "0.1.0"}, {"0.3.1", "0.3.1"}, {"1.1.0", "1.1.0"}} {
		if got := (&pluginconf.Conf{CNIVersion: tc.cniVersion}).Version(); got != tc.want {
			t.Errorf("Version() of cniVersion %q = %q, want %q", tc.cniVersion, got, tc.want)
		}
	}
}

// TestMarshalPluginEntry: the agent writes the file with json.Marshal; the
// plugin entry of a list has no cniVersion or name of its own, and what it
// writes must parse back to the same configuration.
func TestMarshalPluginEntry(t *testing.T) {
	entry := pluginconf.Conf{Type: pluginconf.Type, SocketPath: "/run/x.sock", CacheDir: "/var/x", RuntimeCacheDir: "/var/y",
		AgentWait: pluginconf.Duration(90 * time.Second), DefaultNetwork: "/etc/cni/net.d/10-calico.conflist",
		Capabilities: map[string]bool{"portMappings": true}}
	data, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"hwnet","socketPath":"/run/x.sock","cacheDir":"/var/x","runtimeCacheDir":"/var/y","agentWait":"1m30s",` +
		`"defaultNetwork":"/etc/cni/net.d/10-calico.conflist","capabilities":{"portMappings":true}}`
	if string(data) != want {
		t.Fatalf("json.Marshal = %s\nwant %s", data, want)
	}
	entry.CNIVersion, entry.Name = "1.0.0", "hwnet"
	data, _ = json.Marshal(entry)
	got, err := pluginconf.Parse(data)
	if err != nil {
		t.Fatalf("Parse(%s): %v", data, err)
	}
	if !reflect.DeepEqual(*got, entry) {
		t.Errorf("Parse(Marshal(conf)) = %+v, want %+v", *got, entry)
	}
}

// TestSpecCommandVersions: CHECK exists from CNI 0.4.0, STATUS and GC
// from 1.1.0; older configurations must refuse them with code 1.
func TestSpecCommandVersions(t *testing.T) {
	tests := []struct {
		version, command string
		allowed          bool
	}{
		{"0.3.1", "ADD", true},
		{"0.3.1", "CHECK", false},
		{"0.4.0", "CHECK", true},
		{"1.0.0", "STATUS", false},
		{"1.0.0", "GC", false},
		{"1.1.0", "STATUS", true},
		{"1.1.0", "GC", true},
		{"", "DEL", true},
		{"", "CHECK", false},
	}
	for _, tc := range tests {
		t.Run(tc.version+" "+tc.command, func(t *testing.T) {
			conf := &pluginconf.Conf{CNIVersion: tc.version, Name: "n"}
			err := conf.AllowsCommand(tc.command)
			var cerr *types.Error
			switch {
			case tc.allowed && err != nil:
				t.Fatalf("AllowsCommand: %v", err)
			case !tc.allowed && (!errors.As(err, &cerr) || cerr.Code != types.ErrIncompatibleCNIVersion):
				t.Fatalf("AllowsCommand = %v, want a code 1 error", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.1.0","name":"hwnet","type":"hwnet","socketPath":"/run/hwnet/cni.sock","cacheDir":"/var/lib/hwnet/cni","agentWait":"30s"}`))
	f.Add([]byte(`{"name":"n","agentWait":"-5ms"}`))
	f.Add([]byte(`{"name":"n","agentWait":0}`))
	f.Add([]byte(`{"cniVersion":"0.1.0","name":"a b"}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","capabilities":{"mac":true},"runtimeConfig":{"mac":"x"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		conf, err := pluginconf.Parse(data)
		if err != nil {
			var cerr *types.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v is not a CNI error", err)
			}
			return
		}
		if conf.Name == "" || conf.AgentWait < 0 || !strings.HasPrefix(conf.SocketPath, "/") || !strings.HasPrefix(conf.CacheDir, "/") {
			t.Fatalf("accepted %q as %+v", data, conf)
		}
		if err := conf.AllowsCommand("ADD"); err != nil {
			t.Fatalf("accepted %q but refuses ADD: %v", data, err)
		}
	})
}
