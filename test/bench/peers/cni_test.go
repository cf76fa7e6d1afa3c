package peers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/netnstest"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// benchNode is the node name the CNI daemons serve.
const benchNode = "bench-node"

// delegateConf is every network's plugin, the default network's too: the
// project's test plugin answering at once, the same for every tool, so
// that what differs is the tools' own work. It answers as sriov-cni does,
// with the sandbox's interface, which the tools report in network-status.
const delegateConf = `"type": "hwnet-test-plugin", "personality": "sriov", "deviceID": "0000:3b:01.0"`

// cniEnv is what the CNI part shares: one API server, one bin directory
// (shims, Multus thin, the delegate), one pod netns.
type cniEnv struct {
	api        *kubeapi.Server
	client     kubernetes.Interface
	counter    *kubeapi.RequestCounter
	kubeconfig string
	binDir     string
	netns      string
	dir        string
	seq        int
}

// benchPod is one pod as the runtime and the API server know it.
type benchPod struct{ namespace, name, uid, sandbox string }

func newCNIEnv(b *testing.B, hwnetBins string) *cniEnv {
	api := kubeapi.Start(b)
	installAPIs(b, api)
	cfg, counter := kubeapi.CountRequests(api.Config())
	// The benchmark plays the controllers and kubelets of many nodes:
	// no client-side rate limit of its own.
	cfg.QPS = -1
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		b.Fatal(err)
	}
	env := &cniEnv{api: api, client: client, counter: counter, dir: sockdir.New(b)}
	env.kubeconfig = api.WriteKubeconfig(b, env.dir)
	env.binDir = filepath.Join(env.dir, "bin")
	plugins := cniplugins.Dir(b)
	copies := map[string]string{filepath.Join(plugins, cniplugins.Recorder): cniplugins.Recorder, filepath.Join(hwnetBins, "hwnet"): "hwnet"}
	if *multusDir != "" {
		copies[filepath.Join(*multusDir, "multus")] = "multus"
		copies[filepath.Join(*multusDir, "multus-shim")] = "multus-shim"
	}
	for src, name := range copies {
		copyFile(b, src, filepath.Join(env.binDir, name))
	}
	env.netns = podNetns(b)
	for i := 1; i <= 4; i++ {
		env.createNAD(b, fmt.Sprintf("net-%d", i), delegateConf)
	}
	return env
}

func copyFile(tb testing.TB, src, dst string) {
	data, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		tb.Fatal(err)
	}
}

// podNetns makes the one network namespace every pod sandbox is: the
// delegate creates no interface in it.
func podNetns(tb testing.TB) string {
	return netnstest.Add(tb, fmt.Sprintf("peers-pod-%d", os.Getpid()))
}

// createNAD creates a NetworkAttachmentDefinition in default whose
// delegate is plugin (the configuration's members besides its name).
func (e *cniEnv) createNAD(tb testing.TB, name, plugin string) {
	dyn, err := dynamic.NewForConfig(e.api.Config())
	if err != nil {
		tb.Fatal(err)
	}
	nad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
		"metadata": map[string]any{"name": name, "namespace": "default"},
		"spec":     map[string]any{"config": `{"cniVersion": "1.0.0", "name": "` + name + `", ` + plugin + `}`},
	}}
	gvr := schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1", Resource: "network-attachment-definitions"}
	if _, err := dyn.Resource(gvr).Namespace("default").Create(context.Background(), nad, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// podnetConf is the default network's configuration file.
func podnetConf() string {
	return `{"cniVersion": "1.0.0", "name": "podnet", "plugins": [{` + delegateConf + `}]}`
}

// newPods creates n pods on the bench node, each asking for nets
// networks.
func (e *cniEnv) newPods(tb testing.TB, n, nets int) []benchPod {
	var names []string
	for i := 1; i <= nets; i++ {
		names = append(names, fmt.Sprintf("net-%d", i))
	}
	pods := make([]benchPod, n)
	for i := range pods {
		e.seq++
		pod, err := e.createPod(context.Background(), fmt.Sprintf("p%d", e.seq), benchNode, names)
		if err != nil {
			tb.Fatal(err)
		}
		pods[i] = pod
	}
	return pods
}

// createPod creates a pod bound to node, as the scheduler leaves it,
// asking for the networks named.
func (e *cniEnv) createPod(ctx context.Context, name, node string, networks []string) (benchPod, error) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": strings.Join(networks, ",")}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}},
	}
	got, err := e.client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return benchPod{}, err
	}
	return benchPod{"default", got.Name, string(got.UID), "sandbox-" + name}, nil
}

func (e *cniEnv) deletePods(tb testing.TB, pods []benchPod) {
	for _, p := range pods {
		if err := e.client.CoreV1().Pods(p.namespace).Delete(context.Background(), p.name, metav1.DeleteOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
}

// requestsServed sums the API server's apiserver_request_total over
// resource requests: every client's, the benchmark's own included.
func (e *cniEnv) requestsServed(tb testing.TB) float64 {
	raw, err := e.client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		// Non-resource requests (/metrics, /readyz) have resource="";
		// subresource="" is another label.
		if !strings.HasPrefix(line, "apiserver_request_total{") || strings.Contains(line, `,resource=""`) || strings.Contains(line, `{resource=""`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// ownRequests counts the benchmark's own resource requests so far.
func (e *cniEnv) ownRequests() float64 {
	var n float64
	for k, v := range e.counter.Snapshot() {
		if !strings.Contains(k, " /") {
			n += float64(v)
		}
	}
	return n
}

// serviceAccountToken gives Multus's daemon the in-cluster credentials it
// insists on: a token of a cluster-admin service account, and the CA.
func (e *cniEnv) serviceAccountToken(tb testing.TB) string {
	ctx := context.Background()
	cs := e.api.Client()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "multus", Namespace: "kube-system"}}
	if _, err := cs.CoreV1().ServiceAccounts("kube-system").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "multus"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "multus", Namespace: "kube-system"}}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	hour := int64(3600)
	tok, err := cs.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, "multus",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &hour}}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(e.dir, "serviceaccount")
	if _, err := writeFile(dir, "token", tok.Status.Token); err != nil {
		tb.Fatal(err)
	}
	if _, err := writeFile(dir, "ca.crt", string(e.api.Config().CAData)); err != nil {
		tb.Fatal(err)
	}
	return dir
}

// cniTool is one CNI implementation as the runtime sees it: the
// configuration directory it reads and the daemon, if any, behind it.
type cniTool struct {
	name    string
	confDir string
	daemon  *proc
	// metrics is hwnet-agent's /metrics URL, for its own view of a request.
	metrics string
}

// startHwnet starts hwnet-agent with its CNI side on the node's tree and
// netns, and waits for it to write hwnet's configuration.
func (e *cniEnv) startHwnet(b *testing.B, node *virtualnode.Node, bins string) *cniTool {
	return e.startAgent(b, node, bins, agentSetup{name: "hwnet", nodeName: benchNode, dir: filepath.Join(e.dir, "hwnet"), pools: dpConfig, http: true})
}

// agentSetup is one hwnet-agent's identity: its tool name in the table,
// the node it serves, its directory and its pool configuration.
// Without http, the agent serves neither metrics nor probes: a hundred
// agents would race for ports the kernel also hands to their clients.
type agentSetup struct {
	name, nodeName, dir, pools string
	http                       bool
}

// startAgent starts hwnet-agent as startHwnet does, for any node: on
// node's tree and netns, or with node nil on the host's netns and an
// empty sysfs tree, as a node without the hardware.
func (e *cniEnv) startAgent(b *testing.B, node *virtualnode.Node, bins string, s agentSetup) *cniTool {
	dir := s.dir
	confDir := filepath.Join(dir, "net.d")
	if _, err := writeFile(confDir, "10-podnet.conflist", podnetConf()); err != nil {
		b.Fatal(err)
	}
	config, err := writeFile(dir, "pools.json", s.pools)
	if err != nil {
		b.Fatal(err)
	}
	k, err := testkubelet.Start(filepath.Join(dir, "dp"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(k.Close)
	servePodResources(b, filepath.Join(dir, "pr.sock"))
	metricsAddr, probeAddr := "", ""
	if s.http {
		metricsAddr, probeAddr = freeAddr(b), freeAddr(b)
	}
	hw := []string{"--sysfs", filepath.Join(dir, "sys"), "--dev", filepath.Join(dir, "dev")}
	if node != nil {
		hw = []string{"--sysfs", node.SysRoot(), "--dev", node.DevRoot(), "--netns", "/run/netns/" + node.NetnsName()}
	} else if err := emptySysfs(hw[1]); err != nil {
		b.Fatal(err)
	}
	args := append(asDeployed(b, filepath.Join(bins, "hwnet-agent")), "--metrics-addr", metricsAddr)
	args = append(args, hw...)
	if *profiles != "" {
		args = append(args, "--pprof")
	}
	p := startIn(b, nil, "hwnet-agent", nil, append(args, "--config-file", config, "--device-plugin-dir", k.Dir, "--pod-resources-socket", filepath.Join(dir, "pr.sock"),
		"--devinfo-dir", filepath.Join(dir, "devinfo"), "--cdi-dir", filepath.Join(dir, "cdi"), "--last-good-config", "",
		"--cni-conf-dir", confDir, "--cni-socket", filepath.Join(dir, "cni.sock"), "--cni-cache-dir", filepath.Join(dir, "cache"),
		"--cni-devinfo-dir", filepath.Join(dir, "cni-devinfo"), "--node-name", s.nodeName, "--kubeconfig", e.kubeconfig,
		"--dra-plugins-dir", mkdir(b, filepath.Join(dir, "plugins")),
		"--pods-api-socket", filepath.Join(dir, "no-pods-api.sock"), "--probe-addr", probeAddr,
		"--cri-network-socket", filepath.Join(dir, "crinet.sock"), "--cri-network-dir", filepath.Join(dir, "networks"),
		// No container runtime here whose sandboxes the agent would
		// reconcile its attachments with.
		"--cri-socket", "")...)
	waitFile(b, p, filepath.Join(confDir, "00-hwnet.conflist"))
	tool := &cniTool{name: s.name, confDir: confDir, daemon: p}
	if s.http {
		tool.metrics = "http://" + metricsAddr + "/metrics"
	}
	return tool
}

// emptySysfs makes the sysfs tree of a node without PCI functions.
func emptySysfs(root string) error {
	for _, d := range []string{"bus/pci/devices", "bus/pci/drivers", "class/net", "devices"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// multusThin writes Multus thin's configuration: the Multus binary is the
// runtime's plugin and does everything itself, per ADD.
func (e *cniEnv) multusThin(b *testing.B) *cniTool {
	dir := filepath.Join(e.dir, "multus-thin")
	conf := fmt.Sprintf(`{"cniVersion": "0.3.1", "name": "multus-cni-network", "type": "multus", "kubeconfig": %q,
  "cniDir": %q, "binDir": %q, "delegates": [%s]}`, e.kubeconfig, filepath.Join(dir, "cache"), e.binDir, podnetConf())
	confDir := filepath.Join(dir, "net.d")
	if _, err := writeFile(confDir, "00-multus.conf", conf); err != nil {
		b.Fatal(err)
	}
	return &cniTool{name: "multus-thin", confDir: confDir}
}

// startMultusThick starts multus-daemon with the daemon configuration
// Multus's thick manifest ships (paths aside), and waits for the
// configuration it generates for multus-shim.
func (e *cniEnv) startMultusThick(b *testing.B) *cniTool {
	dir := filepath.Join(e.dir, "multus-thick")
	confDir := filepath.Join(dir, "net.d")
	if _, err := writeFile(confDir, "10-podnet.conflist", podnetConf()); err != nil {
		b.Fatal(err)
	}
	daemonConf, err := json.Marshal(map[string]any{
		"cniVersion": "0.3.1", "logLevel": "verbose", "logToStderr": true,
		"cniConfigDir": confDir, "multusAutoconfigDir": confDir, "multusConfigFile": "auto",
		"socketDir": filepath.Join(dir, "run"), "daemonSocketDir": filepath.Join(dir, "run"), "binDir": e.binDir, "cniDir": filepath.Join(dir, "cache"),
	})
	if err != nil {
		b.Fatal(err)
	}
	config, err := writeFile(dir, "daemon-config.json", string(daemonConf))
	if err != nil {
		b.Fatal(err)
	}
	sa := e.serviceAccountToken(b)
	host := e.api.Config().Host
	port := host[strings.LastIndexByte(host, ':')+1:]
	mounts := []mount{{sa, "/var/run/secrets/kubernetes.io/serviceaccount"}}
	p := startIn(b, nil, "multus-daemon", mounts, "/usr/bin/env", "MULTUS_NODE_NAME="+benchNode,
		"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+port,
		filepath.Join(*multusDir, "multus-daemon"), "-config", config)
	waitFile(b, p, filepath.Join(confDir, "00-multus.conf"))
	return &cniTool{name: "multus-thick", confDir: confDir, daemon: p}
}

// freeAddr is a 127.0.0.1 address with a port the kernel just handed out.
func freeAddr(tb testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// agentADDs returns the count and total seconds of the ADDs hwnet-agent
// served, from its request histogram.
func agentADDs(tb testing.TB, url string) (count, seconds float64) {
	scrape(tb, url, func(line string) {
		if !strings.Contains(line, `command="ADD"`) || !strings.Contains(line, `result="success"`) {
			return
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		switch {
		case strings.HasPrefix(line, "hwnet_cni_request_duration_seconds_sum{"):
			seconds = v
		case strings.HasPrefix(line, "hwnet_cni_request_duration_seconds_count{"):
			count = v
		}
	})
	return count, seconds
}

// scrape calls fn with each line of a Prometheus text exposition at url.
func scrape(tb testing.TB, url string, fn func(line string)) {
	resp, err := http.Get(url)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fn(sc.Text())
	}
}

// goMemory is the Go heap and stacks in use of a Go daemon, in MiB, from
// its /metrics (Prometheus's Go collector).
func goMemory(tb testing.TB, url string) (heap, stacks float64) {
	scrape(tb, url, func(line string) {
		name, value, ok := strings.Cut(line, " ")
		v, _ := strconv.ParseFloat(value, 64)
		switch {
		case !ok:
		case name == "go_memstats_heap_inuse_bytes":
			heap = v / (1 << 20)
		case name == "go_memstats_stack_inuse_bytes":
			stacks = v / (1 << 20)
		}
	})
	return heap, stacks
}

// saveProfile saves a Go daemon's pprof profile (a path under
// /debug/pprof/) under -profile-dir.
func saveProfile(tb testing.TB, metricsURL, profile, name string) {
	if err := fetchProfile(metricsURL, profile, name); err != nil {
		tb.Fatal(err)
	}
}

// fetchProfile is saveProfile, returning its error: for a profile taken
// while the test's goroutine works.
func fetchProfile(metricsURL, profile, name string) error {
	resp, err := http.Get(strings.TrimSuffix(metricsURL, "/metrics") + "/debug/pprof/" + profile)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	_, err = writeFile(*profiles, name, string(data))
	return err
}

// saveSmaps saves a daemon's /proc/PID/smaps under -profile-dir: which
// mappings its resident pages are in.
func saveSmaps(tb testing.TB, pid int, name string) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := writeFile(*profiles, name, string(data)); err != nil {
		tb.Fatal(err)
	}
}

// waitFile waits for a daemon to write path; a daemon that exits fails
// the benchmark.
func waitFile(tb testing.TB, p *proc, path string) {
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-p.exited:
			tb.Fatalf("%s exited (%v) before writing %s\nlog:\n%s", p.name, p.err, path, p.tail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s did not write %s\nlog:\n%s", p.name, path, p.tail())
		}
	}
}
