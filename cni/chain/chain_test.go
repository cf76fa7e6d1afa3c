package chain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// call is one plugin execution as the plugin saw it.
type call struct {
	path  string
	stdin map[string]interface{}
	env   []string
}

// recordingExec answers each plugin at once with a result naming the
// interface it was asked for (the same for the same plugin), and records what each was given: the
// boundary between a runtime and a plugin process is exactly stdin, the
// environment and stdout (CNI spec section 3), so this is what a real
// plugin would see.
type recordingExec struct {
	version.PluginDecoder
	mu    sync.Mutex
	calls []call
	fail  string // a plugin type that answers with an error
}

func (e *recordingExec) FindInPath(plugin string, paths []string) (string, error) {
	if plugin == "missing" {
		return "", fmt.Errorf("failed to find plugin %q in path %s", plugin, paths)
	}
	return "/opt/cni/bin/" + plugin, nil
}

func (e *recordingExec) ExecPlugin(_ context.Context, path string, stdin []byte, env []string) ([]byte, error) {
	var conf map[string]interface{}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.calls = append(e.calls, call{path: path, stdin: conf, env: env})
	e.mu.Unlock()
	if strings.HasSuffix(path, "/"+e.fail) {
		return nil, &types.Error{Code: 7, Msg: "device busy"}
	}
	vars := map[string]string{}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			vars[k] = v
		}
	}
	if vars["CNI_COMMAND"] != "ADD" {
		return nil, nil
	}
	version := fmt.Sprintf(`"cniVersion":%q,`, conf["cniVersion"])
	switch {
	case strings.HasSuffix(path, "/noversion"):
		version = ""
	case strings.HasSuffix(path, "/otherversion"):
		version = `"cniVersion":"0.4.0",`
	}
	out := fmt.Appendf(nil, `{%s"interfaces":[{"name":%q,"mac":"02:00:00:00:00:%02x","sandbox":%q}],"ips":[{"address":"10.1.0.%d/24","interface":0}]}`,
		version, vars["CNI_IFNAME"], len(path), vars["CNI_NETNS"], len(path))
	if strings.HasSuffix(path, "/pretty") {
		var indented bytes.Buffer
		err := json.Indent(&indented, out, "", "  ")
		return indented.Bytes(), err
	}
	return out, nil
}

func (e *recordingExec) take() []call {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.calls
	e.calls = nil
	return c
}

var lists = []struct {
	name, conf string
}{
	{"0.3.0 one plugin", `{"cniVersion":"0.3.0","name":"a","plugins":[{"type":"host-device","ipam":{"type":"static"}}]}`},
	{"0.3.1 chained, prevResult", `{"cniVersion":"0.3.1","name":"b","plugins":[{"type":"sriov","vlan":3},{"type":"tuning","sysctl":{"net.ipv4.conf.all.log_martians":"1"}}]}`},
	{"0.4.0 capabilities", `{"cniVersion":"0.4.0","name":"c","plugins":[{"type":"sriov","capabilities":{"mac":true,"ips":true}},{"type":"tuning","capabilities":{"mac":true}},{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`},
	{"1.0.0 own runtimeConfig replaced", `{"cniVersion":"1.0.0","name":"d","plugins":[{"type":"ib-sriov","capabilities":{"infinibandGUID":true},"runtimeConfig":{"infinibandGUID":"old"}},{"type":"noop","runtimeConfig":{"kept":1}}]}`},
	{"1.1.0 disabled capability", `{"cniVersion":"1.1.0","name":"e","plugins":[{"type":"macvlan","master":"eth0","capabilities":{"mac":false,"ips":true}},{"type":"portmap","capabilities":{"portMappings":true},"snat":true}]}`},
	{"0.2.0 no prevResult", `{"cniVersion":"0.2.0","name":"f","plugins":[{"type":"bridge","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}]}`},
	{"1.0.0 result without cniVersion", `{"cniVersion":"1.0.0","name":"g","plugins":[{"type":"noversion"}]}`},
	{"1.1.0 result of another version, pretty-printed", `{"cniVersion":"1.1.0","name":"h","plugins":[{"type":"otherversion"},{"type":"pretty"}]}`},
	{"1.0.0 last result of another version", `{"cniVersion":"1.0.0","name":"i","plugins":[{"type":"pretty"},{"type":"otherversion"}]}`},
}

func runtime() (chain.Runtime, *libcni.RuntimeConf) {
	caps := map[string]json.RawMessage{
		"mac":            json.RawMessage(`"02:00:00:aa:bb:cc"`),
		"ips":            json.RawMessage(`["10.1.0.9/24"]`),
		"infinibandGUID": json.RawMessage(`"c2:11:22:33:44:55:66:77"`),
		"bandwidth":      json.RawMessage(`{"ingressRate":1000,"ingressBurst":10}`),
		"portMappings":   json.RawMessage(`[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]`),
	}
	args := [][2]string{{"IgnoreUnknown", "true"}, {"K8S_POD_NAMESPACE", "ns"}, {"K8S_POD_NAME", "p"}}
	rt := chain.Runtime{ContainerID: "c0ffee", Netns: "/var/run/netns/p", IfName: "net1", Args: args, CapabilityArgs: caps}
	lrt := &libcni.RuntimeConf{ContainerID: rt.ContainerID, NetNS: rt.Netns, IfName: rt.IfName, Args: args,
		CapabilityArgs: map[string]interface{}{}}
	for k, v := range caps {
		lrt.CapabilityArgs[k] = v
	}
	return rt, lrt
}

// TestSpec0_3_0_NetworkConfigurationListsAsLibcni runs each list through
// Chain and through libcni's AddNetworkList: every plugin must get the
// same stdin (name and cniVersion of the list, prevResult from the plugin
// before, runtimeConfig of the capabilities it declares) and the same
// environment, and the results must be equal.
func TestSpec0_3_0_NetworkConfigurationListsAsLibcni(t *testing.T) {
	for _, tc := range lists {
		t.Run(tc.name, func(t *testing.T) {
			exec := &recordingExec{}
			path := []string{"/opt/cni/bin", "/usr/lib/cni"}
			environ := []string{"PATH=/usr/bin", "CNI_COMMAND=stale", "HOME=/root"}
			rt, lrt := runtime()
			list := parse(t, tc.conf)

			want, err := libcni.NewCNIConfigWithCacheDir(path, t.TempDir(), exec).AddNetworkList(context.Background(), libcniList(t, tc.conf), lrt)
			if err != nil {
				t.Fatal(err)
			}
			libcniCalls := exec.take()
			got, gotJSON, err := chain.New(exec, path, environ).Add(context.Background(), list, rt)
			if err != nil {
				t.Fatal(err)
			}
			chainCalls := exec.take()

			compareCalls(t, "ADD", chainCalls, libcniCalls)
			if g, w := marshal(t, got), marshal(t, want); g != w || got.Version() != want.Version() {
				t.Errorf("result\nchain:  %s (version %s)\nlibcni: %s (version %s)", g, got.Version(), w, want.Version())
			}
			// The JSON kept for DEL and CHECK reads back as the result.
			if again, err := create.CreateFromBytes(gotJSON); err != nil || marshal(t, again) != marshal(t, want) {
				t.Errorf("result JSON %s reads back as %v, %v; want %s", gotJSON, again, err, marshal(t, want))
			}
			if env := chainCalls[0].env; !slices.Contains(env, "PATH=/usr/bin") || slices.Contains(env, "CNI_COMMAND=stale") {
				t.Errorf("environment %v: want the given one, its CNI_ variables replaced", env)
			}
		})
	}
}

// TestDelAndCheckAsLibcni runs DEL and CHECK after an ADD through Chain,
// given the ADD's result, and through libcni, given its own cached
// result: every plugin must get the same stdin and environment. DEL runs
// in reverse and both pass prevResult from CNI 0.4.0 on (CNI spec 1.0
// sections 3.2 and 3.3); CHECK of an older list is refused.
func TestDelAndCheckAsLibcni(t *testing.T) {
	for _, tc := range lists {
		t.Run(tc.name, func(t *testing.T) {
			exec := &recordingExec{}
			rt, lrt := runtime()
			ctx := context.Background()
			ch := chain.New(exec, nil, nil)
			lib := libcni.NewCNIConfigWithCacheDir(nil, t.TempDir(), exec)
			list, llist := parse(t, tc.conf), libcniList(t, tc.conf)
			added, _, err := ch.Add(ctx, list, rt)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := lib.AddNetworkList(ctx, llist, lrt); err != nil {
				t.Fatal(err)
			}
			exec.take()

			checkErr := ch.Check(ctx, list, rt, added)
			chainCheck := exec.take()
			libCheckErr := lib.CheckNetworkList(ctx, llist, lrt)
			compareCalls(t, "CHECK", chainCheck, exec.take())
			if (checkErr == nil) != (libCheckErr == nil) {
				t.Errorf("CHECK error %v, libcni %v", checkErr, libCheckErr)
			}
			if old := list.CNIVersion < "0.4.0"; old != errors.Is(checkErr, chain.ErrCheckNotSupported) {
				t.Errorf("CHECK of version %s: error %v", list.CNIVersion, checkErr)
			}

			if err := ch.Del(ctx, list, rt, added); err != nil {
				t.Fatal(err)
			}
			chainDel := exec.take()
			if err := lib.DelNetworkList(ctx, llist, lrt); err != nil {
				t.Fatal(err)
			}
			compareCalls(t, "DEL", chainDel, exec.take())
			for _, c := range chainDel {
				if _, has := c.stdin["prevResult"]; has != (list.CNIVersion >= "0.4.0") {
					t.Errorf("DEL of %s at version %s: prevResult given: %v", c.path, list.CNIVersion, has)
				}
			}
		})
	}
}

func compareCalls(t *testing.T, what string, chainCalls, libcniCalls []call) {
	t.Helper()
	if len(chainCalls) != len(libcniCalls) {
		t.Fatalf("%s: chain ran %d plugins, libcni %d", what, len(chainCalls), len(libcniCalls))
	}
	for i := range chainCalls {
		if chainCalls[i].path != libcniCalls[i].path {
			t.Errorf("%s plugin %d: %s, libcni ran %s", what, i, chainCalls[i].path, libcniCalls[i].path)
		}
		if !reflect.DeepEqual(chainCalls[i].stdin, libcniCalls[i].stdin) {
			t.Errorf("%s plugin %d stdin\nchain:  %v\nlibcni: %v", what, i, chainCalls[i].stdin, libcniCalls[i].stdin)
		}
		if d := envDiff(chainCalls[i].env, libcniCalls[i].env); d != "" {
			t.Errorf("%s plugin %d environment: %s", what, i, d)
		}
	}
}

func TestAddErrors(t *testing.T) {
	tests := []struct {
		name, conf, containerID, ifName, fail, want string
	}{
		{"plugin fails", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a"},{"type":"b"}]}`, "c1", "net1", "b", `plugin type="b" failed (add): device busy`},
		{"plugin missing", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"missing"}]}`, "c1", "net1", "", `failed to find plugin "missing"`},
		{"bad container ID", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a"}]}`, "", "net1", "", "missing containerID"},
		{"bad interface name", `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a"}]}`, "c1", "a/b", "", "interface name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			exec := &recordingExec{fail: tc.fail}
			rt := chain.Runtime{ContainerID: tc.containerID, IfName: tc.ifName, Netns: "/n"}
			_, _, err := chain.New(exec, nil, nil).Add(context.Background(), parse(t, tc.conf), rt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A plugin missing from the path does not keep DEL from the others; it is
// reported apart, so a caller can let a pod whose ADD failed for want of
// it be torn down (CNI spec: DEL should succeed when what it would remove
// is already gone).
func TestDelPassesOverMissingPlugins(t *testing.T) {
	conf := `{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"a"},{"type":"missing"},{"type":"b"}]}`
	exec := &recordingExec{}
	rt := chain.Runtime{ContainerID: "c1", IfName: "net1", Netns: "/n"}
	err := chain.New(exec, []string{"/opt/cni/bin"}, nil).Del(context.Background(), parse(t, conf), rt, nil)
	var missing *chain.MissingPluginsError
	if !errors.As(err, &missing) || !slices.Equal(missing.Types, []string{"missing"}) {
		t.Fatalf("Del = %v, want a MissingPluginsError naming plugin type missing", err)
	}
	var ran []string
	for _, c := range exec.take() {
		ran = append(ran, c.path)
	}
	if want := []string{"/opt/cni/bin/b", "/opt/cni/bin/a"}; !slices.Equal(ran, want) {
		t.Errorf("DEL ran %v, want %v", ran, want)
	}
	exec.fail = "b"
	if err := chain.New(exec, nil, nil).Del(context.Background(), parse(t, conf), rt, nil); errors.As(err, &missing) || err == nil {
		t.Errorf("Del with a failing plugin = %v, want its failure", err)
	}
}

func parse(t testing.TB, conf string) *netconf.Delegate {
	t.Helper()
	dl, err := netconf.Parse([]byte(conf), "", "test")
	if err != nil {
		t.Fatal(err)
	}
	return dl
}

func libcniList(t testing.TB, conf string) *libcni.NetworkConfigList {
	t.Helper()
	list, err := libcni.NetworkConfFromBytes([]byte(conf))
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func marshal(t *testing.T, v interface{}) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// envDiff compares the CNI_ variables, which libcni takes from the process
// environment and Chain from the one it was given.
func envDiff(a, b []string) string {
	pick := func(env []string) []string {
		var out []string
		for _, kv := range env {
			if strings.HasPrefix(kv, "CNI_") {
				out = append(out, kv)
			}
		}
		slices.Sort(out)
		return out
	}
	if x, y := pick(a), pick(b); !slices.Equal(x, y) {
		return fmt.Sprintf("chain %v, libcni %v", x, y)
	}
	return ""
}
