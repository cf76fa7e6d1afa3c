package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/podresources"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/testkubelet"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

const (
	nodeName = "node-1"
	sriovRes = "intel.com/sriov_a"
	dpdkRes  = "intel.com/sriov_dpdk"
	ibRes    = "nvidia.com/ib"
	podNS    = "cnf"
	otherNS  = "other-ns"
)

// defaultNet is the node's default network; its host-local leases are in
// the node's own directory, so no run, test or cluster on the host shares
// them.
func (n *testNode) defaultNet() string {
	return `{"cniVersion":"1.0.0","name":"podnet","plugins":[{"type":"bridge","bridge":"cni0","isGateway":true,
  "ipam":{"type":"host-local","subnet":"10.244.0.0/24","dataDir":"` + n.ipamDir() + `","routes":[{"dst":"0.0.0.0/0"}]}}]}`
}

// runtimeCacheDir is the runtime's libcni cache on the node.
func (n *testNode) runtimeCacheDir() string { return filepath.Join(n.dir, "runtime-cni") }

// ipamDir is where host-local keeps the node's leases.
func (n *testNode) ipamDir() string { return filepath.Join(n.dir, "ipam") }

// testNode is a virtual SR-IOV node with a real API server, a kubelet
// PodResources endpoint, the real reference plugins and a Delegator wired to
// all of them, as hwnet-agent wires it.
type testNode struct {
	t       testing.TB
	node    *virtualnode.Node
	api     *kubeapi.Server
	counter *kubeapi.RequestCounter
	// counted is the API server configuration whose requests counter counts.
	counted *rest.Config
	nads    nadclient.Interface
	kubelet *testkubelet.PodResources
	bin     string
	dir     string
	conf    []byte
	d       *Delegator
	// ledger is the device ledger the ADDs reserve in, reading kubelet
	// and the records as the agent's does.
	ledger *ledger.Book
	// seen is the Delegator the pod cache tells of pods, as the agent wires it.
	seen   atomic.Pointer[Delegator]
	status *report.StatusWriter
}

func newTestNode(t *testing.T, name string) *testNode {
	return newTestNodeOf(t, name, virtualnode.DefaultSpec())
}

// newTestNodeOf is newTestNode on spec's virtual node.
func newTestNodeOf(t *testing.T, name string, spec *virtualnode.Spec) *testNode {
	vnodetest.RequireRoot(t)
	spec.Name = name
	node := vnodetest.BuildForTest(t, spec, vnodetest.OpenDB(t), true)
	n := newHarness(t)
	n.node = node
	return n
}

// newHarness is everything but the virtual node: enough for delegates
// that need no hardware.
func newHarness(t testing.TB) *testNode {
	n := &testNode{t: t, dir: t.TempDir(), bin: cniplugins.Dir(t)}
	n.api = kubeapi.Start(t)
	for _, crd := range []string{"network-attachment-definition.yaml", "multinetwork.hwnet.io_podnetworks.yaml", "multinetwork.hwnet.io_podnetworkattachments.yaml"} {
		n.api.ApplyCRD(t, "../../deploy/crds/"+crd)
	}
	n.api.CreateNamespace(t, podNS)
	n.api.CreateNamespace(t, otherNS)
	var err error
	if n.nads, err = nadclient.NewForConfig(n.api.Config()); err != nil {
		t.Fatal(err)
	}
	n.startKubelet()
	n.writeConfs()
	n.start(context.Background())
	return n
}

func (n *testNode) startKubelet() {
	sock := filepath.Join(n.dir, "pod-resources.sock")
	pr, err := testkubelet.ServePodResources(sock)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(pr.Close)
	n.kubelet = pr
}

func (n *testNode) writeConfs() {
	confDir := filepath.Join(n.dir, "net.d")
	os.MkdirAll(confDir, 0o755)
	defPath := filepath.Join(confDir, "10-podnet.conflist")
	if err := os.WriteFile(defPath, []byte(n.defaultNet()), 0o644); err != nil {
		n.t.Fatal(err)
	}
	conf, _ := json.Marshal(pluginconf.Conf{CNIVersion: "1.0.0", Name: "hwnet", Type: "hwnet",
		CacheDir: filepath.Join(n.dir, "cache"), RuntimeCacheDir: n.runtimeCacheDir(), DefaultNetwork: defPath})
	n.conf = conf
}

var quiet = slog.New(slog.DiscardHandler)

// start wires a Delegator as the agent does, with caches fed by the API
// server through a request counter.
func (n *testNode) start(ctx context.Context) {
	cfg, counter := kubeapi.CountRequests(n.api.Config())
	n.counter, n.counted = counter, cfg
	client := kubernetesClient(n.t, cfg)
	ctx, cancel := context.WithCancel(ctx)
	n.t.Cleanup(cancel)
	pods := cache.NewInformerPods(client, nodeName, quiet)
	pods.Notify(func(p cache.Pod) {
		if d := n.seen.Load(); d != nil {
			d.PodSeen(p)
		}
	}, nil)
	go pods.Run(ctx)
	nadClient, err := nadclient.NewForConfig(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	nads := cache.NewNADInformer(nadClient, quiet)
	go nads.Run(ctx)
	devs, err := podresources.Dial(ctx, filepath.Join(n.dir, "pod-resources.sock"))
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { devs.Close() })
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		n.t.Fatal(err)
	}
	podNetworks := cache.NewPodNetworkInformer(ctx, dyn, client.Discovery(), quiet)
	podNetworks.Warm(ctx)
	n.status = report.NewStatusWriter(client, "hwnet", quiet)
	n.t.Cleanup(n.status.Shutdown)
	n.ledger = ledger.NewBook(ledger.BookOptions{Sources: ledger.Sources{PodResourcesSocket: filepath.Join(n.dir, "pod-resources.sock"),
		Records: attachments.NewStore(filepath.Join(n.dir, "cache")), PodUID: pods.UIDOf}})
	n.ledger.Judge(ledger.Verdicts{})
	if err := n.ledger.Load(ctx); err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(n.ledger.Close)
	n.d = New(Options{
		ConfDir: filepath.Join(n.dir, "net.d"), DPDevinfoDir: filepath.Join(n.dir, "devinfo/dp"),
		CNIDevinfoDir: filepath.Join(n.dir, "devinfo/cni"), AllowedNamespaces: []string{"default", otherNS},
		Pods: pods, NADs: nads, PodNetworks: podNetworks, Devices: devs, Ledger: n.ledger, Status: n.status, PodWait: 20 * time.Second,
	})
	n.seen.Store(n.d)
}

func (n *testNode) createNAD(ns, name, resource, config string) {
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
	if resource != "" {
		nad.Annotations = map[string]string{"k8s.v1.cni.cncf.io/resourceName": resource}
	}
	if _, err := n.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(context.Background(), nad, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// createPod makes a pod bound to the node, as the scheduler would, and
// records its allocation in kubelet, as the device manager would.
func (n *testNode) createPod(name, networks string, devices map[string][]string) *corev1.Pod {
	return n.createPodAnnotated(name, map[string]string{"k8s.v1.cni.cncf.io/networks": networks}, devices)
}

// createPodAnnotated is createPod with the pod's own annotations.
func (n *testNode) createPodAnnotated(name string, annotations map[string]string, devices map[string][]string) *corev1.Pod {
	annotations["other"] = "kept"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNS, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "none"}}},
	}
	got, err := n.api.Client().CoreV1().Pods(podNS).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	n.kubelet.SetContainers(podNS, name, testkubelet.Container{Name: "app", Devices: devices})
	for res, ids := range devices {
		for _, id := range ids {
			info := devinfo.NewPCI(devinfo.PCI{PCIAddress: id})
			if err := devinfo.Write(filepath.Join(n.dir, "devinfo/dp"), res, id, info); err != nil {
				n.t.Fatal(err)
			}
		}
	}
	return got
}

// podNetns creates a pod network namespace visible inside the node.
func (n *testNode) podNetns(name string) string {
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		n.t.Fatalf("ip netns add: %v: %s", err, out)
	}
	n.t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return "/var/run/netns/" + name
}

func (n *testNode) request(command, containerID string, pod *corev1.Pod) *wire.Request {
	req := &wire.Request{Command: command, ContainerID: containerID, Netns: "/var/run/netns/" + containerID,
		IfName: "eth0", Path: n.bin, Config: n.conf}
	if pod != nil {
		req.Args = fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			pod.Namespace, pod.Name, containerID, pod.UID)
	}
	return req
}

// call runs one CNI request inside the node, as the agent serving the
// node would.
func (n *testNode) call(ctx context.Context, command, containerID, netnsPath string, pod *corev1.Pod) (json.RawMessage, error) {
	req := n.request(command, containerID, pod)
	req.Netns = netnsPath
	var out json.RawMessage
	err := n.node.Run(ctx, func() error {
		var err error
		out, err = n.d.Handle(ctx, req)
		return err
	})
	return out, err
}

// waitPod waits until the delegator's pod cache holds the pod.
func waitPod(t testing.TB, n *testNode, namespace, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := n.d.opts.Pods.Pod(ctx, cache.PodRef{Namespace: namespace, Name: name}); err != nil {
		t.Fatalf("pod %s/%s never reached the cache: %v", namespace, name, err)
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (n *testNode) vfs(driver, pf string) []virtualnode.Function {
	var out []virtualnode.Function
	for _, f := range n.node.Devices() {
		if f.PF == pf && f.Driver == driver {
			out = append(out, f)
		}
	}
	return out
}

// handleAt is a netlink handle into a network namespace, closed when the
// test ends.
func handleAt(t testing.TB, nsPath string) *netlink.Handle {
	t.Helper()
	h, err := netns.GetFromPath(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	nl, err := netlink.NewHandleAt(h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nl.Close)
	return nl
}

// linksIn lists the links of a network namespace by name.
func linksIn(t testing.TB, nsPath string) map[string]netlink.Link {
	t.Helper()
	links, err := handleAt(t, nsPath).LinkList()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]netlink.Link{}
	for _, l := range links {
		out[l.Attrs().Name] = l
	}
	return out
}

func addrsOf(t testing.TB, nsPath, ifName string) []string {
	t.Helper()
	nl := handleAt(t, nsPath)
	l, err := nl.LinkByName(ifName)
	if err != nil {
		t.Fatalf("%s in pod netns: %v", ifName, err)
	}
	addrs, _ := nl.AddrList(l, netlink.FAMILY_V4)
	var out []string
	for _, a := range addrs {
		out = append(out, a.IPNet.String())
	}
	return out
}

func networkStatus(t *testing.T, n *testNode, name string) []status.NetworkStatus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.d.Close(ctx); err != nil {
		t.Fatal(err)
	}
	pod, err := n.api.Client().CoreV1().Pods(podNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Annotations["other"] != "kept" {
		t.Fatalf("network-status write lost another annotation: %v", pod.Annotations)
	}
	list, err := status.Decode(pod.Annotations[status.Annotation])
	if err != nil {
		t.Fatalf("network-status %q: %v", pod.Annotations[status.Annotation], err)
	}
	return list
}

func names(m map[string]netlink.Link) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// defaultRoutes lists a netns's IPv4 default routes as "ifname via gw".
func defaultRoutes(t testing.TB, nsPath string) []string {
	t.Helper()
	nl := handleAt(t, nsPath)
	routes, err := nl.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		if r.Dst != nil && r.Dst.String() != "0.0.0.0/0" || r.Gw == nil {
			continue
		}
		l, err := nl.LinkByIndex(r.LinkIndex)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Attrs().Name+" via "+r.Gw.String())
	}
	return out
}
