package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/netnstest"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/testkubelet"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// The hand-out soak's node: the default virtual node's E810-C VFs on iavf
// in one pool and on vfio-pci in another, each served through its device
// plugin or the DRA driver as the test switches them, and PF 0's VF layout
// declared as the node has it (8 VFs, 6-7 on vfio-pci) or smaller.
const (
	soakNode      = "soak-node"
	soakNamespace = "soak"
	pf0           = "0000:3b:00.0"
	// soakReact bounds each wait for the agent to reflect a change, with
	// room for a loaded machine: a pass is not a measurement.
	soakReact = 60 * time.Second
)

// soakPools are the pools' resources, in the configuration's order.
func soakPools() []string { return []string{netdevice, dpdk} }

// soakLayout is a state of the configuration the test writes.
type soakLayout struct {
	// dra says which pools are served through the DRA driver.
	dra map[string]bool
	// small gives PF 0 4 VFs, 2-3 on vfio-pci, instead of 8 with 6-7.
	small bool
}

// baseLayout is the configuration every sequence starts from and drains
// back to.
func baseLayout() soakLayout {
	return soakLayout{dra: map[string]bool{netdevice: false, dpdk: true}}
}

func (l soakLayout) config() string {
	mode := func(res string) string {
		if l.dra[res] {
			return "dra"
		}
		return "devicePlugin"
	}
	numVFs, vfio := 8, "6-7"
	if l.small {
		numVFs, vfio = 4, "2-3"
	}
	return fmt.Sprintf(`resourceList:
  - resourceName: sriov_netdevice
    mode: %s
    selectors: {vendors: ["8086"], devices: ["1889"], drivers: [iavf]}
  - resourceName: sriov_dpdk
    mode: %s
    selectors: {drivers: [vfio-pci]}
vfLayouts:
  - name: pf0
    selectors: {pfNames: [enp59s0f0]}
    numVfs: %d
    drivers: [{vfs: %q, driver: vfio-pci}]
`, mode(netdevice), mode(dpdk), numVFs, vfio)
}

// world is the real agent on a virtual node, with the actors around it:
// a stand-in kubelet (device plugin registration and Allocate, PodResources
// that can go away, DRA prepare over the driver's socket), the runtime
// (CNI requests over the agent's socket) and one real API server.
type world struct {
	t       *testing.T
	node    *virtualnode.Node
	api     *kubeapi.Server
	kubelet *testkubelet.Kubelet
	// podres is kubelet's PodResources, nil while it is down.
	podres  *testkubelet.PodResources
	opts    agent.Options
	logs    *tailBuffer
	metrics *metrics.Metrics
	slices  *sliceWatch
	records *attachments.Store
	cni     *wire.Client
	cniConf []byte
	// plugins is the CNI_PATH, state the recorder's attachments, limbo
	// the network namespace a vanished netdev waits in.
	plugins, state, limbo string
	running               *runningAgent
}

// runningAgent is one agent.Run and the DRA socket's client kubelet
// keeps to it.
type runningAgent struct {
	cancel context.CancelFunc
	done   chan error
	conn   *grpc.ClientConn
	dra    drapb.DRAPluginClient
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, api: kubeapi.Start(t), logs: newTailBuffer(1 << 20), metrics: metrics.New(), plugins: cniplugins.Dir(t)}
	w.api.ApplyCRD(t, "../deploy/crds/network-attachment-definition.yaml")
	w.api.CreateNamespace(t, soakNamespace)
	if _, err := w.api.Client().CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: soakNode}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w.node = vnodetest.BuildForTest(t, virtualnode.DefaultSpec(), vnodetest.OpenDB(t), true)
	w.enactWrites()
	dir := sockdir.New(t)
	w.state = filepath.Join(dir, "recorder")
	w.startKubelet(dir)
	w.opts = w.options(dir)
	w.records = w.opts.CNI.Records()
	w.cni = wire.NewClient(w.opts.CNI.SocketPath)
	w.writeNetworks(dir)
	w.writeConfig(baseLayout())
	w.limbo = "hwlimbo-" + strconv.Itoa(os.Getpid())
	netnstest.Add(t, w.limbo)
	w.slices = watchSlices(t, w.api.Client())
	t.Cleanup(w.stopAgent)
	return w
}

// enactWrites runs the virtual node's kernel emulation, logging to the
// agent's bounded log rather than the test's, which a soak would grow.
func (w *world) enactWrites() {
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan struct{}), make(chan error, 1)
	go func() {
		done <- w.node.EnactWrites(ctx, slog.New(slog.NewTextHandler(w.logs, nil)), func() { close(ready) })
	}()
	select {
	case <-ready:
	case err := <-done:
		cancel()
		w.t.Fatalf("kernel emulation: %v", err)
	}
	w.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			w.t.Errorf("kernel emulation: %v", err)
		}
	})
}

func (w *world) startKubelet(dir string) {
	k, err := testkubelet.Start(filepath.Join(dir, "dp"))
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(k.Close)
	w.kubelet = k
	w.servePodResources(filepath.Join(dir, "pr.sock"), nil)
	w.t.Cleanup(func() { w.closePodResources() })
}

// options are the agent's, every path in dir; the device-info files
// nothing holds are collected at once, so that a drained node is seen
// at its baseline within a moment. The stand-in kubelet records an
// allocation as Allocate returns and comes back from a restart with
// every pod it had, so the agent waits for it seconds, not the tens a
// real kubelet may need: else one pod deleted before the ledger saw it,
// or a kubelet restart, holds a sequence's drain up for 10 to 30 s.
func (w *world) options(dir string) agent.Options {
	cni := &daemon.Options{ConfDir: filepath.Join(dir, "net.d"), SocketPath: filepath.Join(dir, "cni.sock"),
		CacheDir: filepath.Join(dir, "cache"), DevinfoDir: filepath.Join(dir, "cni-devinfo"), NodeName: soakNode,
		PodsAPISocket: filepath.Join(dir, "no-pods-api.sock"), REST: w.api.Config(), BinDir: filepath.Join(dir, "bin")}
	plugins := filepath.Join(dir, "plugins")
	return agent.Options{
		SysfsRoot: w.node.SysRoot(), DevRoot: w.node.DevRoot(), Netns: "/run/netns/" + w.node.NetnsName(),
		ConfigFile: filepath.Join(dir, "config.yaml"), PluginDir: w.kubelet.Dir, PodResourcesSocket: filepath.Join(dir, "pr.sock"),
		DevinfoDir: filepath.Join(dir, "devinfo"), CDIDir: filepath.Join(dir, "cdi"), DRAPluginsDir: plugins, FenceDir: filepath.Join(dir, "fences"),
		PollInterval: 100 * time.Millisecond, RescanInterval: time.Hour, GCInterval: 50 * time.Millisecond,
		DevinfoGrace: time.Nanosecond, LedgerInterval: 50 * time.Millisecond,
		KubeletSettle: 100 * time.Millisecond, PendingGrace: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(w.logs, nil)), Metrics: w.metrics,
		ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA(nil), CNI: cni,
		DRA: &agent.DRAOptions{NodeName: soakNode, REST: w.api.Config(), RegistrarDir: filepath.Join(dir, "reg"),
			PluginDir: filepath.Join(plugins, dra.DefaultDriverName)},
	}
}

// writeNetworks writes the default network and a NetworkAttachmentDefinition
// per pool, each a recorder that answers as sriov-cni and keeps a file per
// attachment, and hwnet's configuration as the runtime passes it.
func (w *world) writeNetworks(dir string) {
	confDir := w.opts.CNI.ConfDir
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		w.t.Fatal(err)
	}
	def := filepath.Join(confDir, "10-podnet.conflist")
	podnet := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":%q,"personality":"plain","stateDir":%q}]}`, cniplugins.Recorder, w.state)
	if err := os.WriteFile(def, []byte(podnet), 0o644); err != nil {
		w.t.Fatal(err)
	}
	conf, err := json.Marshal(pluginconf.Conf{CNIVersion: "1.0.0", Name: "hwnet", Type: "hwnet", SocketPath: w.opts.CNI.SocketPath,
		CacheDir: w.opts.CNI.CacheDir, RuntimeCacheDir: filepath.Join(dir, "runtime-cni"), DefaultNetwork: def})
	if err != nil {
		w.t.Fatal(err)
	}
	w.cniConf = conf
	nads, err := nadclient.NewForConfig(w.api.Config())
	if err != nil {
		w.t.Fatal(err)
	}
	for _, res := range soakPools() {
		nad := &nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: nadName(res), Namespace: soakNamespace, Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": res}},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: fmt.Sprintf(`{"cniVersion":"1.0.0","name":%q,"type":%q,"personality":"sriov","stateDir":%q}`,
				nadName(res), cniplugins.Recorder, w.state)}}
		if _, err := nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(soakNamespace).Create(context.Background(), nad, metav1.CreateOptions{}); err != nil {
			w.t.Fatal(err)
		}
	}
}

// nadName is the NetworkAttachmentDefinition of a pool's resource.
func nadName(res string) string { return "net-" + res[strings.LastIndex(res, "_")+1:] }

func (w *world) writeConfig(l soakLayout) {
	tmp := w.opts.ConfigFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(l.config()), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, w.opts.ConfigFile); err != nil {
		w.t.Fatal(err)
	}
}

// startAgent runs a new agent with the world's options and waits until it
// serves: its CNI socket is up (the last front end it starts) and each
// device plugin pool registered anew.
func (w *world) startAgent(l soakLayout) {
	regs := len(w.kubelet.Registrations())
	a, err := agent.New(w.opts)
	if err != nil {
		w.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningAgent{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	w.running = r
	w.waitFor("the agent's CNI socket", func() bool { return fileExists(w.opts.CNI.SocketPath) })
	w.waitRegistered(l.devicePluginPools(), regs)
	sock := filepath.Join(w.opts.DRA.PluginDir, "dra.sock")
	if r.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		w.t.Fatal(err)
	}
	r.dra = drapb.NewDRAPluginClient(r.conn)
}

// devicePluginPools are the pools l serves through their device plugin.
func (l soakLayout) devicePluginPools() []string {
	var out []string
	for _, res := range soakPools() {
		if !l.dra[res] {
			out = append(out, res)
		}
	}
	return out
}

// waitRegistered waits until each pool registered after the first regs
// registrations and sent its first list.
func (w *world) waitRegistered(pools []string, regs int) {
	for _, res := range pools {
		w.waitFor("the registration of "+res, func() bool {
			for _, r := range w.kubelet.Registrations()[regs:] {
				if r.ResourceName == res {
					return w.kubelet.Resource(res).Lists > 0
				}
			}
			return false
		})
	}
}

// stopAgent stops the running agent, as SIGTERM does.
func (w *world) stopAgent() {
	r := w.running
	if r == nil {
		return
	}
	w.running = nil
	r.conn.Close()
	r.cancel()
	if err := <-r.done; err != nil {
		w.t.Errorf("agent.Run: %v", err)
	}
}

// servePodResources serves kubelet's PodResources with the pods given,
// as kubelet does from its checkpoint when it starts.
func (w *world) servePodResources(path string, pods []*dpPod) {
	pr, err := testkubelet.ServePodResources(path)
	if err != nil {
		w.t.Fatal(err)
	}
	for _, p := range pods {
		pr.SetPod(p.pod.Namespace, p.pod.Name, p.resource, p.devices...)
	}
	w.podres = pr
}

func (w *world) closePodResources() {
	if w.podres != nil {
		w.podres.Close()
		w.podres = nil
	}
}

// waitFor waits until cond holds, failing the test after soakReact.
func (w *world) waitFor(what string, cond func() bool) {
	w.t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(soakReact)
	for !cond() {
		if time.Now().After(deadline) {
			// The agent runs in this process: its goroutines say where it
			// is stuck, which a replay may not reproduce.
			var stacks strings.Builder
			pprof.Lookup("goroutine").WriteTo(&stacks, 1) //nolint:errcheck // a strings.Builder does not fail
			w.t.Fatalf("waiting for %s: not within %s; goroutines:\n%s", what, soakReact, stacks.String())
		}
		<-tick.C
	}
}

// metric sums the samples of a metric whose labels include each of
// labels (name, value, name, value, ...). It gathers hwnet's own
// collectors alone: the process collector's /proc reads, polled every few
// milliseconds, took a sixth of the soak's CPU.
func (w *world) metric(name string, labels ...string) float64 {
	families, err := w.metrics.Gather()
	if err != nil {
		w.t.Fatalf("gather the agent's metrics: %v", err)
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m.GetLabel(), labels) {
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

func hasLabels(have []*dto.LabelPair, want []string) bool {
	for i := 0; i+1 < len(want); i += 2 {
		if !slices.ContainsFunc(have, func(p *dto.LabelPair) bool { return p.GetName() == want[i] && p.GetValue() == want[i+1] }) {
			return false
		}
	}
	return true
}

// unknownSources is how many sources of holders the agent cannot read.
func (w *world) unknownSources() int { return int(w.metric("hwnet_ledger_unknown_sources")) }

// layoutChanges is how many VF layout changes the agent made to PF 0.
func (w *world) layoutChanges() float64 {
	return w.metric("hwnet_vf_layout_changes_total", "pf", pf0)
}

// offer is how the agent offers a device through its pool's front end.
type offer struct {
	id      string
	offered bool
	// why names the taints or the health of a device not offered.
	why string
}

// offers are the devices of the resource as the agent offers them now:
// kubelet's latest ListAndWatch list, or the node's ResourceSlices.
func (w *world) offers(res string, viaDRA bool) []offer {
	if !viaDRA {
		var out []offer
		for _, d := range w.kubelet.Resource(res).Devices {
			out = append(out, offer{id: d.ID, offered: d.Health == pluginapi.Healthy, why: d.Health})
		}
		return out
	}
	byName := map[string]string{}
	for _, f := range w.node.Devices() {
		if f.PF != "" && resourceOf(f.Driver) == res {
			byName[dra.DeviceName(f.Addr)] = f.Addr
		}
	}
	var out []offer
	for name, d := range w.slices.devices() {
		if id, ok := byName[name]; ok {
			out = append(out, offer{id: id, offered: len(d.Taints) == 0, why: taintKeys(d.Taints)})
		}
	}
	return out
}

// resourceOf is the pool of a VF bound to driver, "" for none.
func resourceOf(driver string) string {
	switch driver {
	case "iavf":
		return netdevice
	case "vfio-pci":
		return dpdk
	}
	return ""
}

func taintKeys(taints []resourceapi.DeviceTaint) string {
	keys := make([]string, len(taints))
	for i, t := range taints {
		keys[i] = t.Key
	}
	return strings.Join(keys, ",")
}

// sliceWatch follows the node's ResourceSlices through an informer.
type sliceWatch struct {
	informer toolscache.SharedIndexInformer
}

func watchSlices(t *testing.T, client kubernetes.Interface) *sliceWatch {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "spec.nodeName=" + soakNode
	}))
	s := &sliceWatch{informer: factory.Resource().V1().ResourceSlices().Informer()}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	return s
}

// devices are the devices of the node's slices by name.
func (s *sliceWatch) devices() map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, o := range s.informer.GetStore().List() {
		for _, d := range o.(*resourceapi.ResourceSlice).Spec.Devices {
			out[d.Name] = d
		}
	}
	return out
}

// tailBuffer keeps the last bytes written to it: a soak's logs would
// grow without bound.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.b = append(b.b, p...)
	if over := len(b.b) - b.max; over > 0 {
		b.b = append(b.b[:0], b.b[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.b)
}

// cniCall sends one CNI request for the pod's sandbox over the agent's
// socket, as the shim does.
func (w *world) cniCall(command, sandbox string, pod *corev1.Pod) error {
	req := &wire.Request{Command: command, ContainerID: sandbox, Netns: "/var/run/netns/" + sandbox, IfName: "eth0",
		Path: w.plugins, Config: w.cniConf,
		Args: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			pod.Namespace, pod.Name, sandbox, pod.UID)}
	ctx, cancel := context.WithTimeout(context.Background(), soakReact)
	defer cancel()
	resp, err := w.cni.Do(ctx, req)
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return resp.Error
	}
	return nil
}

// attached are the devices the sandbox's attachment record binds.
func (w *world) attached(sandbox string) []string {
	rec, err := w.records.Load(sandbox)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		w.t.Fatalf("record of %s: %v", sandbox, err)
	}
	var out []string
	for _, a := range rec.Attachments {
		if a.DeviceID != "" {
			out = append(out, a.DeviceID)
		}
	}
	return out
}
