// Package pluginexec runs CNI plugins as child processes that die with
// the process that runs them.
//
// libcni's invoke.RawExec leaves a plugin running when its caller dies.
// hwnet-agent shares the host's PID namespace, so a host-device ADD under
// way when the agent is killed goes on without it: it can move a VF's
// netdev into a sandbox whose DEL already ran, where nothing will ever
// take it back. Exec asks the kernel to send each plugin SIGKILL when its
// parent goes (PR_SET_PDEATHSIG), so no plugin outlives the agent or the
// shim that started it.
package pluginexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// Exec implements libcni's invoke.Exec as its DefaultExec does, but for
// the plugins' lifetime. It does not import the invoke package, which
// links OpenTelemetry and net/http into the CNI shim (pluginexec_test.go
// holds it to the interface).
type Exec struct {
	version.PluginDecoder
	// Stderr gets what a plugin that succeeded printed on stderr; nil
	// drops it.
	Stderr io.Writer
}

// New returns an Exec passing plugins' stderr to stderr.
func New(stderr io.Writer) *Exec { return &Exec{Stderr: stderr} }

// textBusyRetries and textBusyWait are libcni's answer to a plugin binary
// still being written: try again a second later, five times.
const (
	textBusyRetries = 5
	textBusyWait    = time.Second
)

// ExecPlugin runs the plugin at path and returns its stdout. A plugin that
// fails yields the *types.Error it printed, or one holding its stderr.
func (e *Exec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	for try := 0; ; try++ {
		stdout, stderr, err := run(ctx, path, stdin, environ)
		if errors.Is(err, syscall.ETXTBSY) && try < textBusyRetries {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(textBusyWait):
			}
			continue
		}
		if err != nil {
			return nil, pluginError(err, stdout, stderr)
		}
		if e.Stderr != nil && len(stderr) > 0 {
			_, _ = e.Stderr.Write(stderr) // informational only
		}
		return stdout, nil
	}
}

// run starts the plugin with PR_SET_PDEATHSIG and waits for it. The
// kernel sends that signal when the *thread* that forked the child ends,
// not the process: a goroutine that locks its thread and returns without
// unlocking ends it, as entering a network namespace does. Held locked
// until the plugin has exited, the forking thread can be no such
// goroutine's.
func run(ctx context.Context, path string, stdin []byte, environ []string) (stdout, stderr []byte, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Env = environ
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err = cmd.Run()
	return out.Bytes(), errOut.Bytes(), err
}

// pluginError is the error of a failed plugin as libcni's RawExec makes
// it: the CNI error the plugin printed on stdout, else a message with its
// stderr.
func pluginError(err error, stdout, stderr []byte) error {
	var e types.Error
	switch {
	case len(stdout) > 0:
		if perr := json.Unmarshal(stdout, &e); perr != nil {
			e.Msg = fmt.Sprintf("netplugin failed but error parsing its diagnostic message %q: %v", stdout, perr)
		}
	case len(stderr) > 0:
		e.Msg = fmt.Sprintf("netplugin failed: %q: %v", stderr, err)
	default:
		e.Msg = fmt.Sprintf("netplugin failed with no error message: %v", err)
	}
	return &e
}

// FindInPath finds a plugin as libcni's invoke.FindInPath does on Linux:
// the first regular file of that name in paths, in order.
func (e *Exec) FindInPath(plugin string, paths []string) (string, error) {
	switch {
	case plugin == "":
		return "", errors.New("no plugin name provided")
	case strings.ContainsRune(plugin, os.PathSeparator):
		return "", fmt.Errorf("invalid plugin name: %s", plugin)
	case len(paths) == 0:
		return "", errors.New("no paths provided")
	}
	for _, dir := range paths {
		full := filepath.Join(dir, plugin)
		if fi, err := os.Stat(full); err == nil && fi.Mode().IsRegular() {
			return full, nil
		}
	}
	return "", fmt.Errorf("failed to find plugin %q in path %s", plugin, paths)
}
