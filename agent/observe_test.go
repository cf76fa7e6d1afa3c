package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/netnstest"
	"github.com/hwnet-io/hwnet/test/sockdir"
)

// TestAgentProbesMetricsEvents: what an operator watches. /readyz turns
// ready once the pools are registered and the CNI socket answers, and not
// ready when the socket is gone; an ADD shows in the latency histogram;
// the pool gauges count devices; a PF going down posts a Node Event with
// the reason, and one when it comes back.
func TestAgentProbesMetricsEvents(t *testing.T) {
	spec := virtualnode.DefaultSpec()
	spec.Name = "observed" // its own netns: other tests' default node may be up
	f := newFixture(t, spec, defaultConfig)
	api := kubeapi.Start(t)
	api.ApplyCRD(t, "../deploy/crds/network-attachment-definition.yaml")
	plugins := cniplugins.Dir(t)
	dir := sockdir.New(t)
	confDir, binDir := filepath.Join(dir, "net.d"), filepath.Join(dir, "bin")
	os.MkdirAll(binDir, 0o755)
	os.MkdirAll(confDir, 0o755)
	os.WriteFile(filepath.Join(confDir, "10-podnet.conflist"),
		[]byte(`{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","personality":"plain"}]}`), 0o644)
	socket := filepath.Join(dir, "cni.sock")
	f.opts.CNI = &daemon.Options{
		ConfDir: confDir, SocketPath: socket, CacheDir: filepath.Join(dir, "cache"),
		DevinfoDir: filepath.Join(dir, "cni-devinfo"), NodeName: "node-1",
		PodsAPISocket: filepath.Join(dir, "no-pods-api.sock"), REST: api.Config(),
		ShimSource: buildShim(t, dir), BinDir: binDir,
	}
	probes, metricsURL := "http://"+freeAddr(t), "http://"+freeAddr(t)
	f.opts.ProbeAddr, f.opts.MetricsAddr = strings.TrimPrefix(probes, "http://"), strings.TrimPrefix(metricsURL, "http://")
	f.start(t)
	waitHTTP(t, probes+"/healthz", http.StatusOK, "ok")
	waitHTTP(t, probes+"/readyz", http.StatusOK, "ok")

	addThroughShim(t, api, filepath.Join(confDir, daemon.DefaultConfFileName), []string{binDir, plugins}, dir)
	waitHTTP(t, metricsURL+"/metrics", http.StatusOK, `hwnet_cni_request_duration_seconds_count{command="ADD",result="success"} 1`)
	waitHTTP(t, metricsURL+"/metrics", http.StatusOK, `hwnet_pool_allocatable_devices{resource="intel.com/sriov_netdevice"} 12`)

	ctx := context.Background()
	if err := f.node.SetLinkUp(ctx, "enp59s0f0", false); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, metricsURL+"/metrics", http.StatusOK, `hwnet_pool_unhealthy_devices{resource="intel.com/sriov_netdevice"} 6`)
	kubeapi.WaitNodeEvent(t, api.Client(), "node-1", events.ReasonDeviceUnhealthy, "link enp59s0f0 is down")
	if err := f.node.SetLinkUp(ctx, "enp59s0f0", true); err != nil {
		t.Fatal(err)
	}
	kubeapi.WaitNodeEvent(t, api.Client(), "node-1", events.ReasonDeviceHealthy, "healthy again")

	if err := os.Remove(socket); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, probes+"/readyz", http.StatusServiceUnavailable, "CNI socket")
}

// addThroughShim runs one pod's ADD as containerd would, through libcni
// and the installed shim.
func addThroughShim(t *testing.T, api *kubeapi.Server, conflist string, path []string, dir string) {
	t.Helper()
	list := waitConfList(t, conflist)
	pod, err := api.Client().CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "observed", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	netnstest.Add(t, "hwnet-agent-obs")
	cni := libcni.NewCNIConfigWithCacheDir(path, filepath.Join(dir, "runtime-cache"), nil)
	rt := &libcni.RuntimeConf{ContainerID: "sandbox-obs", NetNS: "/var/run/netns/hwnet-agent-obs", IfName: "eth0",
		Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", pod.Name}, {"K8S_POD_UID", string(pod.UID)}}}
	if _, err := cni.AddNetworkList(context.Background(), list, rt); err != nil {
		t.Fatalf("ADD through the shim: %v", err)
	}
	t.Cleanup(func() { cni.DelNetworkList(context.Background(), list, rt) })
}

// freeAddr is a localhost address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitHTTP waits until GET url answers code with a body containing text.
func waitHTTP(t *testing.T, url string, code int, text string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(react); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == code && strings.Contains(string(body), text) {
			return
		}
		last = resp.Status + ": " + string(body)
	}
	t.Fatalf("GET %s never answered %d with %q; last: %.2000s", url, code, text, last)
}

// TestAgentBadConfigAndRestart: a bad pool configuration plus a restart
// does not take the node's pools away (a CrashLoopBackOff with every pool
// at 0 before): the agent starts on the last good configuration it kept,
// says why in the log and on /readyz, names the copy it serves, and is
// ready again once the file is fixed.
func TestAgentBadConfigAndRestart(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig)
	f.opts.LastGoodConfig = filepath.Join(t.TempDir(), "last-good")
	probes := "http://" + freeAddr(t)
	f.opts.ProbeAddr = strings.TrimPrefix(probes, "http://")
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	f.stop(t)

	f.writeConfig(t, "resourceList: [{resourceName: broken, selectors: {colour: [blue]}}]\n")
	f.start(t)
	f.wait(t, netdevice, "the last good pools registered again", counts(12, 12))
	f.waitLog(t, "configuration rejected at start; serving the last good one")
	f.waitLog(t, `msg="configuration served" file=`+f.opts.LastGoodConfig+` sha256=`+sha256Hex(defaultConfig))
	waitHTTP(t, probes+"/readyz", http.StatusServiceUnavailable, "rejected, serving the last good one")

	f.writeConfig(t, defaultConfig)
	waitHTTP(t, probes+"/readyz", http.StatusOK, "ok\nnote: pool intel.com/empty has no device: hwnetctl doctor")
}

// TestAgentSeesAConfigChangedBeforeItsWatch: a configuration written after
// the agent read the file at start but before its watch began (a
// ConfigMap update landing while the pod starts) made no event the watch
// could see: the agent served the last good configuration and stayed
// unready until the next change.
func TestAgentSeesAConfigChangedBeforeItsWatch(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig)
	f.opts.LastGoodConfig = filepath.Join(t.TempDir(), "last-good")
	if err := os.WriteFile(f.opts.LastGoodConfig, []byte(defaultConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	probes := "http://" + freeAddr(t)
	f.opts.ProbeAddr = strings.TrimPrefix(probes, "http://")
	f.writeConfig(t, "resourceList: [{resourceName: broken, selectors: {colour: [blue]}}]\n")
	a, err := agent.New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	f.writeConfig(t, defaultConfig)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent.Run: %v", err)
		}
	})
	waitHTTP(t, probes+"/readyz", http.StatusOK, "ok")
	f.waitLog(t, `msg="configuration reloaded"`)
}

// TestAgentServesWhenLastGoodCannotBeKept: a valid pool configuration is
// served even when its last good copy cannot be written (a missing
// directory, an unwritable /var/lib/hwnet: the agent exited at start, a
// crash loop with every pool at 0). The log says why with the error, and
// hwnet_config_last_good_unkept says so to whoever watches the metrics, at
// start and at each reload that cannot keep its copy.
// The log and hwnet_config_info name each configuration served by the
// SHA-256 of its file, at start and at each reload: what an admin checks
// a changed ConfigMap against.
func TestAgentServesWhenLastGoodCannotBeKept(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig)
	f.opts.LastGoodConfig = filepath.Join(t.TempDir(), "missing", "last-good")
	f.opts.Metrics = metrics.New()
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	f.waitLog(t, `msg="configuration served but not kept for the next start"`)
	if !f.logs.Contains("err=") || !f.logs.Contains("no such file or directory") {
		t.Errorf("the warning does not carry the error under err; logs:\n%s", f.logs)
	}
	scrape := httptest.NewServer(f.opts.Metrics.Handler(false))
	t.Cleanup(scrape.Close)
	waitHTTP(t, scrape.URL+"/metrics", http.StatusOK, "hwnet_config_last_good_unkept 1")
	waitHTTP(t, scrape.URL+"/metrics", http.StatusOK, configInfo(defaultConfig))
	f.waitLog(t, `msg="configuration served" file=`+f.opts.ConfigFile+` sha256=`+sha256Hex(defaultConfig))

	if err := os.MkdirAll(filepath.Dir(f.opts.LastGoodConfig), 0o755); err != nil {
		t.Fatal(err)
	}
	reloaded := strings.Replace(defaultConfig, "resourceName: empty", "resourceName: empty2", 1)
	f.writeConfig(t, reloaded)
	waitHTTP(t, scrape.URL+"/metrics", http.StatusOK, "hwnet_config_last_good_unkept 0")
	waitHTTP(t, scrape.URL+"/metrics", http.StatusOK, configInfo(reloaded))
	f.waitLog(t, `msg="configuration reloaded" file=`+f.opts.ConfigFile+` sha256=`+sha256Hex(reloaded))
	if kept, err := os.ReadFile(f.opts.LastGoodConfig); err != nil || !strings.Contains(string(kept), "empty2") {
		t.Errorf("the reloaded configuration was not kept: %q, %v", kept, err)
	}
}

// sha256Hex is the hex SHA-256 of config, as sha256sum prints it.
func sha256Hex(config string) string {
	sum := sha256.Sum256([]byte(config))
	return hex.EncodeToString(sum[:])
}

// configInfo is the hwnet_config_info sample of config served.
func configInfo(config string) string {
	return `hwnet_config_info{sha256="` + sha256Hex(config) + `"} 1`
}
