package peers

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// plugExec runs CNI plugins as a container runtime does (libcni), and
// keeps, for each process it ran, its wall time and CPU from the kernel's
// rusage, which counts the children the plugin waited for.
type plugExec struct {
	invoke.RawExec
	mu   sync.Mutex
	runs []plugRun
}

type plugRun struct {
	plugin    string
	wall, cpu time.Duration
}

func (e *plugExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = environ, bytes.NewReader(stdin), &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if cmd.ProcessState != nil {
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		e.mu.Lock()
		e.runs = append(e.runs, plugRun{filepath.Base(path), wall, cpu})
		e.mu.Unlock()
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %s%s", filepath.Base(path), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes(), nil
}

func (e *plugExec) Decode(b []byte) (version.PluginInfo, error) {
	return version.PluginSupports(version.All.SupportedVersions()...), nil
}

// take returns the runs recorded since the last take.
func (e *plugExec) take() []plugRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.runs
	e.runs = nil
	return r
}

// runtime is the container runtime's CNI side for one tool: the first
// configuration of its directory, run with libcni.
type cniRuntime struct {
	cni   *libcni.CNIConfig
	exec  *plugExec
	list  *libcni.NetworkConfigList
	netns string
}

func newRuntime(confDir, binDir, cacheDir, netns string) (*cniRuntime, error) {
	files, err := libcni.ConfFiles(confDir, []string{".conf", ".conflist"})
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CNI configuration in %s: %v", confDir, err)
	}
	first := files[0]
	for _, f := range files {
		first = min(first, f)
	}
	list, err := libcni.ConfListFromFile(first)
	if err != nil {
		if list, err = singleConfAsList(first, err); err != nil {
			return nil, err
		}
	}
	e := &plugExec{}
	return &cniRuntime{cni: libcni.NewCNIConfigWithCacheDir([]string{binDir}, cacheDir, e), exec: e, list: list, netns: netns}, nil
}

// singleConfAsList reads a one-plugin .conf the way containerd's go-cni
// still does: Multus writes its 00-multus.conf in that form, which libcni
// has deprecated but runtimes load.
func singleConfAsList(file string, listErr error) (*libcni.NetworkConfigList, error) {
	//lint:ignore SA1019 the runtimes this bench stands in for still read .conf files
	conf, err := libcni.ConfFromFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, listErr)
	}
	//lint:ignore SA1019 as above
	return libcni.ConfListFromConf(conf)
}

func (r *cniRuntime) conf(pod benchPod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: pod.sandbox, NetNS: r.netns, IfName: "eth0", Args: [][2]string{
		{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", pod.namespace}, {"K8S_POD_NAME", pod.name},
		{"K8S_POD_INFRA_CONTAINER_ID", pod.sandbox}, {"K8S_POD_UID", pod.uid},
	}}
}

// add and del run one command and return what the runtime's exec of the
// configured plugin (the shim, or Multus thin) cost.
func (r *cniRuntime) add(ctx context.Context, pod benchPod) (plugRun, error) {
	_, err := r.cni.AddNetworkList(ctx, r.list, r.conf(pod))
	return r.single(err)
}

func (r *cniRuntime) del(ctx context.Context, pod benchPod) (plugRun, error) {
	return r.single(r.cni.DelNetworkList(ctx, r.list, r.conf(pod)))
}

func (r *cniRuntime) single(err error) (plugRun, error) {
	runs := r.exec.take()
	if err != nil {
		return plugRun{}, err
	}
	if len(runs) != 1 {
		return plugRun{}, fmt.Errorf("the runtime ran %d plugins, want 1", len(runs))
	}
	return runs[0], nil
}

// writeFile writes data to dir/name, creating dir.
func writeFile(dir, name, data string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(data), 0o644)
}

// mkdir makes the directory, and its parents, and returns it.
func mkdir(tb testing.TB, dir string) string {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// addConcurrent and delConcurrent run a command beside others, so they do
// not account plugin runs by order.
func (r *cniRuntime) addConcurrent(ctx context.Context, pod benchPod) (plugRun, error) {
	_, err := r.cni.AddNetworkList(ctx, r.list, r.conf(pod))
	return plugRun{}, err
}

func (r *cniRuntime) delConcurrent(ctx context.Context, pod benchPod) (plugRun, error) {
	return plugRun{}, r.cni.DelNetworkList(ctx, r.list, r.conf(pod))
}
