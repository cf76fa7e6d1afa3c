package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/netnstest"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

// The agent with its CNI side on: it installs the shim, writes hwnet's
// configuration once the default network's exists (NPWG 6.1), serves the
// shim's requests, and publishes network-status with the default network's
// entry (5.2). The runtime's part is played by libcni, as containerd does.
func TestSpec6_1_AgentServesCNI(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig)
	api := kubeapi.Start(t)
	api.ApplyCRD(t, "../deploy/crds/network-attachment-definition.yaml")
	plugins := cniplugins.Dir(t)
	dir := sockdir.New(t)
	confDir, binDir := filepath.Join(dir, "net.d"), filepath.Join(dir, "bin")
	os.MkdirAll(binDir, 0o755)
	f.opts.CNI = &daemon.Options{
		ConfDir: confDir, SocketPath: filepath.Join(dir, "cni.sock"), CacheDir: filepath.Join(dir, "cache"),
		DevinfoDir: filepath.Join(dir, "cni-devinfo"), NodeName: "node-1",
		PodsAPISocket: filepath.Join(dir, "no-pods-api.sock"), REST: api.Config(),
		ShimSource: buildShim(t, dir), BinDir: binDir,
	}
	f.start(t)
	own := filepath.Join(confDir, daemon.DefaultConfFileName)
	f.waitLog(t, "hwnet's CNI config withheld")
	// hwnetctl devices reads the records from a node with no pod yet.
	if _, err := os.Stat(f.opts.CNI.CacheDir); err != nil {
		t.Errorf("the records' directory before any ADD: %v, want it made at start", err)
	}
	if _, err := os.Stat(own); err == nil {
		t.Fatal("hwnet's CNI config written before the default network's exists (6.1)")
	}
	os.MkdirAll(confDir, 0o755)
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"),
		[]byte(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","personality":"plain"}]}`), 0o644)
	list := waitConfList(t, own)
	if _, err := os.Stat(filepath.Join(binDir, "hwnet")); err != nil {
		t.Fatalf("shim not installed before the config: %v", err)
	}

	pod, err := api.Client().CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{binDir, plugins}, filepath.Join(dir, "runtime-cache"), nil)
	netnstest.Add(t, "hwnet-agent-cni")
	rt := &libcni.RuntimeConf{ContainerID: "sandbox-1", NetNS: "/var/run/netns/hwnet-agent-cni", IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "plain"}, {"K8S_POD_UID", string(pod.UID)}}}
	ctx := context.Background()
	res, err := cni.AddNetworkList(ctx, list, rt)
	if err != nil {
		t.Fatalf("ADD through the shim: %v\nagent logs:\n%s", err, f.logs)
	}
	if res.Version() != "1.1.0" {
		t.Errorf("result version %s, want the default network's 1.1.0", res.Version())
	}
	waitStatus(t, api, pod)
	if err := cni.GetStatusNetworkList(ctx, list); err != nil {
		t.Errorf("STATUS: %v", err)
	}
	if err := cni.DelNetworkList(ctx, list, rt); err != nil {
		t.Errorf("DEL: %v", err)
	}
}

func buildShim(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "hwnet-build", "hwnet")
	if b, err := exec.Command("go", "build", "-o", out, "github.com/hwnet-io/hwnet/cmd/hwnet").CombinedOutput(); err != nil {
		t.Fatalf("building the shim: %v\n%s", err, b)
	}
	return out
}

func waitConfList(t *testing.T, path string) *libcni.NetworkConfigList {
	t.Helper()
	deadline := time.Now().Add(react)
	for {
		list, err := libcni.ConfListFromFile(path)
		if err == nil {
			return list
		}
		if time.Now().After(deadline) {
			t.Fatalf("hwnet's CNI config never appeared: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitStatus(t *testing.T, api *kubeapi.Server, pod *corev1.Pod) {
	t.Helper()
	deadline := time.Now().Add(react)
	for time.Now().Before(deadline) {
		got, err := api.Client().CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err == nil && got.Annotations[status.Annotation] != "" {
			var list []status.NetworkStatus
			if err := json.Unmarshal([]byte(got.Annotations[status.Annotation]), &list); err != nil || len(list) != 1 ||
				list[0].Name != "podnet" || !list[0].Default {
				t.Fatalf("network-status %s, want the default network's entry alone (5.2)", got.Annotations[status.Annotation])
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("network-status never written")
}

// TestNewChecksCNISettingsFirst: a missing node name or an unusable
// kubeconfig fails New, before any pool registers with kubelet (a
// DaemonSet without NODE_NAME crash-looped re-registering its pools).
func TestNewChecksCNISettingsFirst(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(defaultConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cni  daemon.Options
		want string
	}{
		{"no node name", daemon.Options{Kubeconfig: filepath.Join(dir, "kubeconfig")}, "--node-name"},
		{"kubeconfig missing", daemon.Options{NodeName: "node-1", Kubeconfig: filepath.Join(dir, "none")}, "--kubeconfig"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := agent.New(agent.Options{ConfigFile: config, CNI: &tt.cni})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
