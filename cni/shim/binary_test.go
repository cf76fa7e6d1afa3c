package shim_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/test/logtest"
)

// TestBinaryEndToEnd builds cmd/hwnet and executes it as a runtime would:
// CNI_* environment, configuration on stdin, result or error on stdout and
// the exit code (CNI spec, "Parameters" and "Result").
func TestBinaryEndToEnd(t *testing.T) {
	binary := filepath.Join(t.TempDir(), "hwnet")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", binary, "github.com/hwnet-io/hwnet/cmd/hwnet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	n := newNode(t)
	n.startAgent(t, handlerFunc(fakeAgent))
	tests := []struct {
		name       string
		env        map[string]string
		wantStdout string
		wantCode   uint
	}{
		{name: "ADD prints the agent's result", env: cniEnv("ADD"), wantStdout: addResult},
		{name: "DEL succeeds silently", env: cniEnv("DEL")},
		{name: "agent error exits 1 with its code", env: cniEnv("ADD", "CNI_ARGS", "FAIL=7"), wantCode: types.ErrInvalidNetworkConfig},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), binary)
			cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
			for k, v := range tc.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.Stdin = bytes.NewReader([]byte(n.config("1.1.0", "1s")))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				exit = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.wantCode != 0 {
				wantCNIError(t, outcome{code: exit, stdout: stdout.String(), stderr: &logtest.Buffer{}}, tc.wantCode, "agent says no")
				return
			}
			if exit != 0 || stdout.String() != tc.wantStdout {
				t.Fatalf("exit %d stdout %q stderr %q; want exit 0 stdout %q", exit, stdout.String(), stderr.String(), tc.wantStdout)
			}
		})
	}
}

// TestBinaryLinksLittle keeps cmd/hwnet free of the packages whose
// initialisation and pages made up most of its CPU per exec beyond a bare
// Go program's: the runtime executes it twice per pod, on a node that is
// busy starting pods (docs/performance.md, "The shim's CPU").
func TestBinaryLinksLittle(t *testing.T) {
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", "github.com/hwnet-io/hwnet/cmd/hwnet").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for pkg := range strings.Lines(string(out)) {
		pkg = strings.TrimSpace(pkg)
		if pkg == "net/http" || pkg == "crypto/tls" || pkg == "regexp" || strings.HasPrefix(pkg, "go.opentelemetry.io/") || strings.HasPrefix(pkg, "k8s.io/") {
			t.Errorf("cmd/hwnet links %s", pkg)
		}
	}
}
