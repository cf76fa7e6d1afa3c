package pluginexec

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// parentEnv makes the test binary a plugin's parent: it runs the plugin
// named by the variable's value through Exec and waits for it.
const parentEnv = "PLUGINEXEC_TEST_PARENT"

func TestMain(m *testing.M) {
	if plugin := os.Getenv(parentEnv); plugin != "" {
		_, err := New(os.Stderr).ExecPlugin(context.Background(), plugin, nil, os.Environ())
		if err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writePlugin writes an executable shell script and returns its path.
func writePlugin(t *testing.T, script string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestExecPluginResults(t *testing.T) {
	tests := []struct {
		name       string
		script     string
		wantOut    string
		wantStderr string
		wantCode   uint
		wantMsg    string
	}{
		{
			name:       "success: stdout returned, stderr passed on",
			script:     `cat; echo note >&2`,
			wantOut:    `{"cniVersion":"1.0.0"}`,
			wantStderr: "note\n",
		},
		{
			name:     "failure: the CNI error the plugin printed",
			script:   `echo '{"cniVersion":"1.0.0","code":11,"msg":"try again"}'; exit 1`,
			wantCode: 11,
			wantMsg:  "try again",
		},
		{
			name:    "failure: stderr in the message",
			script:  `echo 'no such device' >&2; exit 1`,
			wantMsg: `netplugin failed: "no such device\n": exit status 1`,
		},
		{
			name:    "failure: nothing printed",
			script:  `exit 3`,
			wantMsg: "netplugin failed with no error message: exit status 3",
		},
		{
			name:    "failure: stdout not a CNI error",
			script:  `echo garbage; exit 1`,
			wantMsg: `netplugin failed but error parsing its diagnostic message "garbage\n"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			out, err := New(&stderr).ExecPlugin(t.Context(), writePlugin(t, tt.script), []byte(`{"cniVersion":"1.0.0"}`), nil)
			if tt.wantMsg == "" {
				if err != nil || string(out) != tt.wantOut || stderr.String() != tt.wantStderr {
					t.Fatalf("got %q, stderr %q, %v; want %q, stderr %q", out, stderr.String(), err, tt.wantOut, tt.wantStderr)
				}
				return
			}
			var cniErr *types.Error
			if !errors.As(err, &cniErr) {
				t.Fatalf("error %v (%T), want a *types.Error", err, err)
			}
			if cniErr.Code != tt.wantCode || !strings.HasPrefix(cniErr.Msg, tt.wantMsg) {
				t.Fatalf("error code %d %q, want %d %q", cniErr.Code, cniErr.Msg, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestExecPluginEnvironmentAndStdin(t *testing.T) {
	plugin := writePlugin(t, `echo "$CNI_COMMAND $(cat)"`)
	out, err := New(nil).ExecPlugin(t.Context(), plugin, []byte("config"), []string{"CNI_COMMAND=ADD"})
	if err != nil || string(out) != "ADD config\n" {
		t.Fatalf("got %q, %v; want %q", out, err, "ADD config\n")
	}
}

func TestExecPluginContextKillsIt(t *testing.T) {
	plugin := writePlugin(t, `exec sleep 600`)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := New(nil).ExecPlugin(ctx, plugin, nil, nil); err == nil {
		t.Fatal("a plugin whose context was cancelled succeeded")
	}
}

// TestPluginDiesWithItsParent: a plugin whose parent is killed (SIGKILL,
// as kubelet or an operator kills hwnet-agent) is killed too, instead of
// finishing an ADD nobody will record or undo.
func TestPluginDiesWithItsParent(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	plugin := writePlugin(t, `echo $$ > "$PIDFILE.tmp" && mv "$PIDFILE.tmp" "$PIDFILE" && exec sleep 600`)
	parent := exec.Command(os.Args[0], "-test.run=^$")
	parent.Env = append(os.Environ(), parentEnv+"="+plugin, "PIDFILE="+pidFile)
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- parent.Wait() }()
	pid := waitPID(t, pidFile, exited)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	waitGone(t, pid)
}

// waitPID waits for the plugin to write its PID, or its parent to fail.
func waitPID(t *testing.T, pidFile string, parentExited <-chan error) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if data, err := os.ReadFile(pidFile); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		select {
		case err := <-parentExited:
			t.Fatalf("the parent exited: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	t.Fatal("the plugin never started")
	return 0
}

// waitGone waits until pid has exited: gone, or a zombie its new parent
// has not reaped yet.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		// The state follows the command name in parentheses.
		if i := bytes.LastIndexByte(stat, ')'); err == nil && i > 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("plugin pid %d still runs after its parent was killed", pid)
}
