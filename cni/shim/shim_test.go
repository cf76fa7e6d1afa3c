package shim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/shim"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/test/logtest"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

type handlerFunc func(ctx context.Context, req *wire.Request) (json.RawMessage, error)

func (f handlerFunc) Handle(ctx context.Context, req *wire.Request) (json.RawMessage, error) {
	return f(ctx, req)
}

// addResult is what a test agent answers to ADD; its odd spacing shows the
// shim prints the agent's bytes rather than a re-encoding.
const addResult = `{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"/var/run/netns/c1"}],"ips":[{"address":"10.1.0.5/24","interface":0}]}`

// fakeAgent answers ADD with addResult, fails requests whose CNI_ARGS
// hold FAIL=<code>, and nothing else.
func fakeAgent(_ context.Context, req *wire.Request) (json.RawMessage, error) {
	var code uint
	if _, err := fmt.Sscanf(req.Args, "FAIL=%d", &code); err == nil {
		return nil, types.NewError(code, "agent says no", "details from the agent")
	}
	if req.Command == wire.CommandAdd {
		return json.RawMessage(addResult), nil
	}
	return nil, nil
}

// node is one test node's paths: the agent socket and the shim's cache.
type node struct {
	dir      string
	socket   string
	cacheDir string
}

func newNode(t testing.TB) *node {
	dir, err := os.MkdirTemp("", "hwshim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return &node{dir: dir, socket: filepath.Join(dir, "run", "cni.sock"), cacheDir: filepath.Join(dir, "cache")}
}

// startAgent serves h on the node's socket until the test ends.
func (n *node) startAgent(t testing.TB, h server.Handler) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.New(h, slog.New(slog.DiscardHandler), nodesocket.Access{}).Serve(ctx, n.socket) }()
	sockdir.Await(t, n.socket, done)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
}

func (n *node) config(cniVersion, agentWait string) string {
	return fmt.Sprintf(`{"cniVersion":%q,"name":"hwnet","type":"hwnet","socketPath":%q,"cacheDir":%q,"agentWait":%q}`,
		cniVersion, n.socket, n.cacheDir, agentWait)
}

func cniEnv(command string, overrides ...string) map[string]string {
	env := map[string]string{
		"CNI_COMMAND": command, "CNI_CONTAINERID": "c1", "CNI_NETNS": "/var/run/netns/c1",
		"CNI_IFNAME": "eth0", "CNI_ARGS": "K8S_POD_NAME=p", "CNI_PATH": "/opt/cni/bin",
	}
	for i := 0; i+1 < len(overrides); i += 2 {
		env[overrides[i]] = overrides[i+1]
	}
	return env
}

type outcome struct {
	code   int
	stdout string
	stderr *logtest.Buffer
}

func run(ctx context.Context, env map[string]string, stdin string) outcome {
	var stdout bytes.Buffer
	stderr := &logtest.Buffer{}
	code := shim.Run(ctx, shim.Invocation{
		Getenv: func(k string) string { return env[k] },
		Stdin:  strings.NewReader(stdin),
		Stdout: &stdout,
		Stderr: stderr,
	})
	return outcome{code: code, stdout: stdout.String(), stderr: stderr}
}

// cniError is the error JSON of the CNI spec's "Result" section.
type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       uint   `json:"code"`
	Msg        string `json:"msg"`
	Details    string `json:"details"`
}

// wantCNIError checks the spec's failure contract: exit code 1 and the
// error JSON on stdout.
func wantCNIError(t *testing.T, out outcome, code uint, msgParts ...string) cniError {
	t.Helper()
	var e cniError
	if err := json.Unmarshal([]byte(out.stdout), &e); err != nil {
		t.Fatalf("stdout %q is not a CNI error: %v", out.stdout, err)
	}
	if out.code != 1 || e.Code != code {
		t.Fatalf("exit %d, error %+v; want exit 1 and code %d", out.code, e, code)
	}
	for _, part := range msgParts {
		if !strings.Contains(e.Msg+"; "+e.Details, part) {
			t.Errorf("error %+v does not mention %q", e, part)
		}
	}
	return e
}

// TestSpecParameters_ReportVersion: VERSION is answered without the agent
// and lists every version libcni supports.
func TestSpecParameters_ReportVersion(t *testing.T) {
	out := run(context.Background(), map[string]string{"CNI_COMMAND": "VERSION"}, `{"cniVersion":"1.1.0"}`)
	if out.code != 0 {
		t.Fatalf("exit %d, stdout %s", out.code, out.stdout)
	}
	info, err := (&version.PluginDecoder{}).Decode([]byte(out.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := info.SupportedVersions(), version.All.SupportedVersions(); !slices.Equal(got, want) {
		t.Errorf("supportedVersions = %v, want %v", got, want)
	}
}

// TestSpecResult_ForwardedCommands: each command goes to the agent; a
// success prints the agent's result bytes unchanged, a failure prints its
// CNI error (code and all) and exits 1.
func TestSpecResult_ForwardedCommands(t *testing.T) {
	n := newNode(t)
	n.startAgent(t, handlerFunc(fakeAgent))
	tests := []struct {
		name       string
		command    string
		args       string
		wantStdout string
		wantCode   uint
	}{
		{name: "ADD prints the agent's result", command: "ADD", wantStdout: addResult},
		{name: "DEL prints nothing", command: "DEL"},
		{name: "CHECK prints nothing", command: "CHECK"},
		{name: "STATUS prints nothing", command: "STATUS"},
		{name: "GC prints nothing", command: "GC"},
		{name: "ADD error code 7 kept", command: "ADD", args: "FAIL=7", wantCode: types.ErrInvalidNetworkConfig},
		{name: "DEL error code 11 kept", command: "DEL", args: "FAIL=11", wantCode: types.ErrTryAgainLater},
		{name: "STATUS error code 51 kept", command: "STATUS", args: "FAIL=51", wantCode: types.ErrLimitedConnectivity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := run(context.Background(), cniEnv(tc.command, "CNI_ARGS", tc.args), n.config("1.1.0", "1s"))
			if tc.wantCode != 0 {
				e := wantCNIError(t, out, tc.wantCode, "agent says no", "details from the agent")
				if e.CNIVersion != "1.1.0" {
					t.Errorf("error cniVersion = %q, want the config's 1.1.0", e.CNIVersion)
				}
				return
			}
			if out.code != 0 || out.stdout != tc.wantStdout {
				t.Fatalf("exit %d stdout %q, want exit 0 stdout %q", out.code, out.stdout, tc.wantStdout)
			}
		})
	}
}

// TestSpecParameters_LocalRefusals are failures the shim reports without
// asking the agent.
func TestSpecParameters_LocalRefusals(t *testing.T) {
	n := newNode(t)
	tests := []struct {
		name     string
		env      map[string]string
		stdin    string
		wantCode uint
		wantMsg  string
	}{
		{"ADD without CNI_IFNAME", cniEnv("ADD", "CNI_IFNAME", ""), n.config("1.1.0", "1s"),
			types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"CHECK on a 0.3.1 config", cniEnv("CHECK"), n.config("0.3.1", "1s"),
			types.ErrIncompatibleCNIVersion, "does not allow CHECK"},
		{"GC on a 1.0.0 config", cniEnv("GC"), n.config("1.0.0", "1s"),
			types.ErrIncompatibleCNIVersion, "does not allow GC"},
		{"config without a name", cniEnv("ADD"), `{"cniVersion":"1.0.0"}`,
			types.ErrInvalidNetworkConfig, "missing network name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wantCNIError(t, run(context.Background(), tc.env, tc.stdin), tc.wantCode, tc.wantMsg)
		})
	}
}

// TestSpecErrorCodes_AgentMissing covers every command while no agent
// listens: ADD and CHECK wait AgentWait and then ask the runtime to try
// again later (code 11), STATUS reports the plugin unavailable (code 50),
// GC needs the agent.
func TestSpecErrorCodes_AgentMissing(t *testing.T) {
	tests := []struct {
		command   string
		agentWait time.Duration
		wantCode  uint
		wantMsg   string
		waits     bool
	}{
		{"ADD", 200 * time.Millisecond, types.ErrTryAgainLater, "after waiting 200ms", true},
		{"CHECK", 200 * time.Millisecond, types.ErrTryAgainLater, "after waiting 200ms", true},
		// A long agentWait shows these do not wait at all.
		{"STATUS", time.Minute, types.ErrPluginNotAvailable, "not reachable", false},
		{"GC", time.Minute, types.ErrTryAgainLater, "GC needs hwnet-agent", false},
	}
	for _, tc := range tests {
		t.Run(tc.command, func(t *testing.T) {
			n := newNode(t)
			start := time.Now()
			out := run(context.Background(), cniEnv(tc.command), n.config("1.1.0", tc.agentWait.String()))
			took := time.Since(start)
			wantCNIError(t, out, tc.wantCode, tc.wantMsg, n.socket, "hwnet-agent DaemonSet pod on this node")
			if tc.waits && took < tc.agentWait {
				t.Errorf("%s gave up after %s, before agentWait %s", tc.command, took, tc.agentWait)
			}
			if !tc.waits && took >= tc.agentWait {
				t.Errorf("%s took %s: it must not wait for the agent", tc.command, took)
			}
		})
	}
}

// TestAddWaitsForAgentToAppear: a pod created while the agent restarts
// gets its network as soon as the agent is back.
func TestAddWaitsForAgentToAppear(t *testing.T) {
	n := newNode(t)
	env := cniEnv("ADD")
	var stdout bytes.Buffer
	stderr := &logtest.Buffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- shim.Run(context.Background(), shim.Invocation{
			Getenv: func(k string) string { return env[k] }, Stdin: strings.NewReader(n.config("1.1.0", "20s")),
			Stdout: &stdout, Stderr: stderr,
		})
	}()
	for !strings.Contains(stderr.String(), "waiting for it") {
		select {
		case code := <-exit:
			t.Fatalf("shim exited %d before waiting: %s", code, stdout.String())
		case <-time.After(time.Millisecond):
		}
	}
	n.startAgent(t, handlerFunc(fakeAgent))
	if code := <-exit; code != 0 || stdout.String() != addResult {
		t.Fatalf("exit %d stdout %q, want 0 and the agent's result", code, stdout.String())
	}
}

// TestWedgedAgentIsAbandoned: when the command's deadline passes the shim
// gives up with "try again later", and the agent's handler sees its
// context end.
func TestWedgedAgentIsAbandoned(t *testing.T) {
	n := newNode(t)
	handlerDone := make(chan error, 1)
	n.startAgent(t, handlerFunc(func(ctx context.Context, _ *wire.Request) (json.RawMessage, error) {
		<-ctx.Done()
		handlerDone <- ctx.Err()
		return nil, ctx.Err()
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	out := run(ctx, cniEnv("ADD"), n.config("1.1.0", "1s"))
	wantCNIError(t, out, types.ErrTryAgainLater, "no answer from hwnet-agent", n.socket)
	select {
	case <-handlerDone:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent kept working for a shim that had gone")
	}
}

func TestCommandDeadline(t *testing.T) {
	for command, want := range map[string]time.Duration{
		"ADD": 4 * time.Minute, "DEL": 2 * time.Minute, "GC": 2 * time.Minute, "CHECK": time.Minute, "STATUS": time.Minute,
	} {
		if got := shim.CommandDeadline(command); got != want {
			t.Errorf("CommandDeadline(%s) = %s, want %s", command, got, want)
		}
	}
}

func BenchmarkForwardedAdd(b *testing.B) {
	n := newNode(b)
	n.startAgent(b, handlerFunc(fakeAgent))
	env := cniEnv("ADD")
	stdin := n.config("1.1.0", "1s")
	b.ReportAllocs()
	for b.Loop() {
		if out := run(context.Background(), env, stdin); out.code != 0 {
			b.Fatalf("exit %d: %s", out.code, out.stdout)
		}
	}
}
