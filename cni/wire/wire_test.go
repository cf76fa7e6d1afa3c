package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func fullEnv(command string) map[string]string {
	return map[string]string{
		"CNI_COMMAND":     command,
		"CNI_CONTAINERID": "c1",
		"CNI_NETNS":       "/var/run/netns/c1",
		"CNI_IFNAME":      "eth0",
		"CNI_ARGS":        "K8S_POD_NAME=p;K8S_POD_NAMESPACE=ns",
		"CNI_PATH":        "/opt/cni/bin:/usr/libexec/cni",
	}
}

// TestSpecParameters_RequestFromEnv follows the CNI spec's "Parameters"
// section: which CNI_* variables each command needs, as libcni's skel
// enforces them.
func TestSpecParameters_RequestFromEnv(t *testing.T) {
	const config = `{"cniVersion":"1.0.0","name":"net"}`
	tests := []struct {
		name     string
		command  string
		unset    []string
		set      map[string]string
		stdin    string
		wantCode uint
		wantMsg  string
	}{
		{name: "ADD with every variable", command: "ADD"},
		{name: "DEL without CNI_NETNS (netns may be gone)", command: "DEL", unset: []string{"CNI_NETNS"}},
		{name: "STATUS needs only CNI_PATH", command: "STATUS", unset: []string{"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"}},
		{name: "GC needs only CNI_PATH", command: "GC", unset: []string{"CNI_CONTAINERID", "CNI_NETNS", "CNI_IFNAME"}},
		{name: "ADD missing CNI_NETNS and CNI_IFNAME", command: "ADD", unset: []string{"CNI_NETNS", "CNI_IFNAME"},
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "[CNI_NETNS,CNI_IFNAME] missing for ADD"},
		{name: "CHECK missing CNI_CONTAINERID", command: "CHECK", unset: []string{"CNI_CONTAINERID"},
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "[CNI_CONTAINERID]"},
		{name: "DEL missing CNI_PATH", command: "DEL", unset: []string{"CNI_PATH"},
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "[CNI_PATH]"},
		{name: "GC missing CNI_PATH", command: "GC", unset: []string{"CNI_PATH"},
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "[CNI_PATH]"},
		{name: "missing CNI_COMMAND", command: "",
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: `CNI_COMMAND ""`},
		{name: "unknown CNI_COMMAND", command: "FROB",
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: `CNI_COMMAND "FROB"`},
		{name: "interface name too long", command: "ADD", set: map[string]string{"CNI_IFNAME": "a-very-long-ifname0"},
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "CNI_IFNAME"},
		{name: "container ID with a slash", command: "ADD", set: map[string]string{"CNI_CONTAINERID": "../x"},
			wantCode: types.ErrInvalidEnvironmentVariables, wantMsg: "CNI_CONTAINERID"},
		{name: "stdin not JSON", command: "ADD", stdin: "{",
			wantCode: types.ErrDecodingFailure, wantMsg: "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vars := fullEnv(tc.command)
			for _, k := range tc.unset {
				delete(vars, k)
			}
			for k, v := range tc.set {
				vars[k] = v
			}
			stdin := config
			if tc.stdin != "" {
				stdin = tc.stdin
			}
			req, err := RequestFromEnv(envOf(vars), []byte(stdin))
			if tc.wantCode == 0 {
				if err != nil {
					t.Fatalf("RequestFromEnv: %v", err)
				}
				want := Request{Command: tc.command, ContainerID: vars["CNI_CONTAINERID"], Netns: vars["CNI_NETNS"],
					IfName: vars["CNI_IFNAME"], Args: vars["CNI_ARGS"], Path: vars["CNI_PATH"], Config: []byte(config)}
				if req.Command != want.Command || req.ContainerID != want.ContainerID || req.Netns != want.Netns ||
					req.IfName != want.IfName || req.Args != want.Args || req.Path != want.Path || !bytes.Equal(req.Config, want.Config) {
					t.Errorf("request = %+v, want %+v", req, want)
				}
				return
			}
			var cerr *types.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error = %v, want a *types.Error", err)
			}
			if cerr.Code != tc.wantCode || !strings.Contains(cerr.Msg, tc.wantMsg) {
				t.Errorf("error = code %d %q, want code %d containing %q", cerr.Code, cerr.Msg, tc.wantCode, tc.wantMsg)
			}
		})
	}
}

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{"ADD", `{"command":"ADD","containerID":"c","config":{"name":"n"}}`, ""},
		{"GC", `{"command":"GC","config":{"name":"n"}}`, ""},
		{"VERSION is answered by the shim", `{"command":"VERSION","config":{}}`, `command "VERSION"`},
		{"no config", `{"command":"DEL","containerID":"c"}`, "without a network configuration"},
		{"null config", `{"command":"DEL","config":null}`, "without a network configuration"},
		{"not JSON", `ADD`, "decoding hwnet request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRequest(strings.NewReader(tc.body))
			if tc.wantErr == "" && err != nil {
				t.Fatalf("DecodeRequest: %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"command":"ADD","containerID":"c","netns":"/n","ifName":"eth0","config":{"name":"n"}}`))
	f.Add([]byte(`{"command":"GC","config":{}}`))
	f.Add([]byte(`{"command":"DEL","config":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(bytes.NewReader(body))
		if err != nil {
			return
		}
		if !KnownCommand(req.Command) || len(req.Config) == 0 {
			t.Fatalf("accepted %q as %+v", body, req)
		}
	})
}

func TestAsCNIError(t *testing.T) {
	inner := types.NewError(types.ErrTryAgainLater, "busy", "warming up")
	tests := []struct {
		name     string
		err      error
		wantCode uint
		wantMsg  string
	}{
		{"CNI error as is", inner, types.ErrTryAgainLater, "busy"},
		{"wrapped CNI error keeps code and context", fmt.Errorf("network ns/a: %w", inner), types.ErrTryAgainLater, "network ns/a: busy; warming up"},
		{"joined delegate failures", errors.Join(errors.New("first"), fmt.Errorf("DEL ns/b: %w", inner)), types.ErrTryAgainLater, "first\nDEL ns/b: busy"},
		{"plain error", errors.New("kaputt"), types.ErrInternal, "kaputt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := AsCNIError(tc.err)
			if got.Code != tc.wantCode || !strings.Contains(got.Msg, tc.wantMsg) {
				t.Errorf("AsCNIError = code %d %q, want code %d containing %q", got.Code, got.Msg, tc.wantCode, tc.wantMsg)
			}
		})
	}
}
