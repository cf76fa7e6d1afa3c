package daemon

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/testcri"
)

const gcNS = "cnf"

// gcNode is one node's runtime GC: its records, a CRI runtime on a
// socket and the API server's pods bound to it.
type gcNode struct {
	name  string
	api   *kubeapi.Server
	cri   *testcri.Runtime
	store *attachments.Store
	def   []byte // the default network's configuration list
	bin   string
	// state holds the default network's leases: one file per attachment
	// (hwnet-test-plugin's stateDir), which its GC frees.
	state string
	r     *reconciler
}

func newGCNode(t *testing.T, api *kubeapi.Server, name string, bin string, client kubernetes.Interface) *gcNode {
	dir := t.TempDir()
	o := Options{ConfDir: filepath.Join(dir, "net.d"), ConfFileName: "00-hwnet.conflist", CacheDir: filepath.Join(dir, "cache"),
		RuntimeCacheDir: filepath.Join(dir, "runtime-cni"), BinDir: bin, NodeName: name}
	state := filepath.Join(dir, "state")
	def := `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","stateDir":"` + state + `"}]}`
	writeTestFile(t, filepath.Join(o.ConfDir, "10-podnet.conflist"), def)
	writeTestFile(t, o.ConfPath(), `{"cniVersion":"1.1.0","name":"hwnet","plugins":[{"type":"hwnet","cacheDir":"`+o.CacheDir+
		`","runtimeCacheDir":"`+o.RuntimeCacheDir+`","defaultNetwork":"`+filepath.Join(o.ConfDir, "10-podnet.conflist")+`"}]}`)
	n := &gcNode{name: name, api: api, cri: testcri.Start(t), store: attachments.NewStore(o.CacheDir), def: []byte(def), bin: bin, state: state}
	o.CRISocket = n.cri.Socket
	log := slog.New(slog.DiscardHandler)
	dopts := delegate.Options{ConfDir: o.ConfDir, OwnConfFile: o.ConfFileName, Logger: log}
	if client != nil {
		status := report.NewStatusWriter(client, "hwnet", log)
		t.Cleanup(status.Shutdown)
		dopts.Status = status
	}
	n.r = &reconciler{d: delegate.New(dopts), o: o, log: log, client: client}
	if client != nil {
		n.r.events = events.Start(t.Context(), client, name)
	}
	return n
}

// runningPod creates a pod bound to the node, Running as kubelet reports it.
func (n *gcNode) runningPod(t *testing.T, name string) *corev1.Pod {
	pod := n.api.CreatePod(t, gcNS, name, n.name, nil)
	pod.Status.Phase = corev1.PodRunning
	pod, err := n.api.Client().CoreV1().Pods(gcNS).UpdateStatus(t.Context(), pod, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// record leaves the attachment record an ADD of the pod's sandbox left, as
// old as a sandbox the runtime would long have listed; pod nil for a
// sandbox of no pod. A record with results is of an ADD that finished.
func (n *gcNode) record(t *testing.T, sandbox string, pod *corev1.Pod, results ...string) {
	rec := &attachmentapi.Record{ContainerID: sandbox, Netns: "/var/run/netns/" + sandbox,
		Attachments: []attachmentapi.Attachment{{Network: "podnet", IfName: "eth0", Default: true, ConfList: json.RawMessage(n.def)}}}
	if pod != nil {
		rec.PodNamespace, rec.PodName, rec.PodUID = pod.Namespace, pod.Name, string(pod.UID)
	}
	if err := n.store.Save(rec); err != nil {
		t.Fatal(err)
	}
	for i, r := range results {
		rec.Attachments[i].Result = json.RawMessage(r)
	}
	if len(results) > 0 {
		if err := n.store.AppendResults(rec); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-10 * time.Minute)
	if err := os.Chtimes(filepath.Join(n.store.Dir(), "containers", sandbox+".json"), old, old); err != nil {
		t.Fatal(err)
	}
}

func (n *gcNode) records(t *testing.T) []string {
	ids, err := n.store.List()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}

// waitEvent waits for the node's RuntimeGCSkipped Event saying want.
func (n *gcNode) waitEvent(t *testing.T, want string) {
	kubeapi.WaitFor(t, "the "+n.name+" RuntimeGCSkipped Event", func() bool {
		evs, err := n.api.Client().CoreV1().Events(metav1.NamespaceAll).List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(evs.Items, func(e corev1.Event) bool {
			return e.InvolvedObject.Kind == "Node" && e.InvolvedObject.Name == n.name &&
				e.Reason == events.ReasonRuntimeGCSkip && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, want)
		})
	})
}

// TestRuntimeGCActsOnlyOnABelievedAnswer: the runtime GC tears down the
// records of sandboxes the runtime forgot only on an answer that agrees
// with the API server's pods of the node. A runtime that lists no sandbox,
// or only sandboxes of other pods (another runtime on the same socket
// path), while the node's pods run, tears nothing down and says why in a
// Warning Event on the node; a believed answer still tears down what the
// runtime forgot, but never the records of a pod the API server has
// running here that the runtime does not list. Without an API server
// client an empty answer while records exist is not believed either.
func TestRuntimeGCActsOnlyOnABelievedAnswer(t *testing.T) {
	kubeapi.Binaries(t)
	api := kubeapi.Start(t)
	api.CreateNamespace(t, gcNS)
	bin := cniplugins.Dir(t)
	foreign := []*runtimeapi.PodSandbox{testcri.Sandbox("f1", "kube-system", "etcd-other", "u1"), testcri.Sandbox("f2", "default", "web-0", "u2")}
	tests := []struct {
		name      string
		noClient  bool
		sandboxes func(a, b *corev1.Pod) []*runtimeapi.PodSandbox
		want      []string // records left
		event     string   // in the node's Event; "" for none awaited
	}{
		{"empty answer", false, func(a, b *corev1.Pod) []*runtimeapi.PodSandbox { return nil },
			[]string{"sandbox-a", "sandbox-b", "sandbox-gone", "sandbox-nopod"}, "lists 0 sandboxes, none of the 2 running pods of this node; runtime GC skipped"},
		{"foreign answer", false, func(a, b *corev1.Pod) []*runtimeapi.PodSandbox { return foreign },
			[]string{"sandbox-a", "sandbox-b", "sandbox-gone", "sandbox-nopod"}, "lists 2 sandboxes, none of the 2 running pods of this node; runtime GC skipped"},
		{"believed answer", false, func(a, b *corev1.Pod) []*runtimeapi.PodSandbox {
			return append(slices.Clone(foreign), testcri.Sandbox("sandbox-a", a.Namespace, a.Name, string(a.UID)))
		}, []string{"sandbox-a", "sandbox-b"}, ""},
		{"empty answer, no API server client", true, func(a, b *corev1.Pod) []*runtimeapi.PodSandbox { return nil },
			[]string{"sandbox-a", "sandbox-b", "sandbox-gone", "sandbox-nopod"}, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := api.Client()
			if tt.noClient {
				client = nil
			}
			n := newGCNode(t, api, fmt.Sprintf("node-%d", i), bin, client)
			a, b := n.runningPod(t, n.name+"-a"), n.runningPod(t, n.name+"-b")
			n.record(t, "sandbox-a", a)
			n.record(t, "sandbox-b", b)
			n.record(t, "sandbox-gone", &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: gcNS, Name: "deleted", UID: "u-deleted"}})
			n.record(t, "sandbox-nopod", nil)
			n.cri.Set(tt.sandboxes(a, b)...)
			if err := n.r.once(t.Context()); err != nil {
				t.Fatalf("reconcile: %v", err)
			}
			if n.cri.Lists() != 1 {
				t.Fatalf("the runtime was asked %d times, want once", n.cri.Lists())
			}
			if got := n.records(t); !slices.Equal(got, tt.want) {
				t.Errorf("records left %v, want %v", got, tt.want)
			}
			if tt.event != "" {
				n.waitEvent(t, tt.event)
			}
		})
	}
}

// TestReconcileWritesTheNetworkStatusAKilledAgentDidNot: the agent writes
// a pod's network-status after answering its ADD; killed in between, it
// left a running pod with none. The reconcile writes it from the finished
// ADD's record, for the sandbox the runtime runs; it leaves be a pod that
// has one, and a pod whose ADD has not finished (no result recorded).
func TestReconcileWritesTheNetworkStatusAKilledAgentDidNot(t *testing.T) {
	kubeapi.Binaries(t)
	api := kubeapi.Start(t)
	api.CreateNamespace(t, gcNS)
	n := newGCNode(t, api, "node-status", cniplugins.Dir(t), api.Client())
	killed, reported, unfinished := n.runningPod(t, "killed"), n.runningPod(t, "reported"), n.runningPod(t, "unfinished")
	const result = `{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:00:05","sandbox":"/var/run/netns/sandbox-killed"}],` +
		`"ips":[{"address":"10.244.0.5/24","gateway":"10.244.0.1","interface":0}]}`
	n.record(t, "sandbox-killed", killed, result)
	n.record(t, "sandbox-reported", reported, result)
	n.record(t, "sandbox-unfinished", unfinished)
	reported.Annotations = map[string]string{status.Annotation: "[]"}
	if _, err := api.Client().CoreV1().Pods(gcNS).Update(t.Context(), reported, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.cri.Set(testcri.Sandbox("sandbox-killed", gcNS, killed.Name, string(killed.UID)),
		testcri.Sandbox("sandbox-reported", gcNS, reported.Name, string(reported.UID)),
		testcri.Sandbox("sandbox-unfinished", gcNS, unfinished.Name, string(unfinished.UID)))
	if err := n.r.once(t.Context()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if err := n.r.d.Close(t.Context()); err != nil { // the queued writes are done
		t.Fatal(err)
	}
	p, err := api.Client().CoreV1().Pods(gcNS).Get(t.Context(), killed.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []status.NetworkStatus
	if err := json.Unmarshal([]byte(p.Annotations[status.Annotation]), &got); err != nil {
		t.Fatalf("pod killed's network-status %q: %v", p.Annotations[status.Annotation], err)
	}
	if len(got) != 1 || got[0].Name != "podnet" || got[0].Interface != "eth0" || !slices.Equal(got[0].IPs, []string{"10.244.0.5/24"}) || !got[0].Default {
		t.Errorf("network-status %+v, want podnet's eth0 with 10.244.0.5/24, the default network", got)
	}
	for name, want := range map[string]string{reported.Name: "[]", unfinished.Name: ""} {
		p, err := api.Client().CoreV1().Pods(gcNS).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Annotations[status.Annotation] != want {
			t.Errorf("pod %s network-status %q, want %q", name, p.Annotations[status.Annotation], want)
		}
	}
}

// TestRuntimeGCKeepsTheDefaultLeaseOfASandboxWithoutRecord (issue 42
// item 6): the runtime attached pods to the default network itself, before
// hwnet's configuration was on the node, so hwnet has no record of them.
// The agent's runtime GC keeps the default network's lease of every one
// still live: a sandbox the runtime lists, and one of a pod the API server
// has running here that the runtime does not list; it frees the lease of a
// sandbox the runtime forgot, of a pod that is gone.
func TestRuntimeGCKeepsTheDefaultLeaseOfASandboxWithoutRecord(t *testing.T) {
	kubeapi.Binaries(t)
	api := kubeapi.Start(t)
	api.CreateNamespace(t, gcNS)
	n := newGCNode(t, api, "node-norecord", cniplugins.Dir(t), api.Client())
	listed, unlisted := n.runningPod(t, "listed"), n.runningPod(t, "unlisted")
	n.runtimeAdd(t, "sandbox-listed", listed.Name)
	n.runtimeAdd(t, "sandbox-unlisted", unlisted.Name)
	n.runtimeAdd(t, "sandbox-gone", "deleted")
	n.cri.Set(testcri.Sandbox("sandbox-listed", gcNS, listed.Name, string(listed.UID)))
	if err := n.r.once(t.Context()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	for sandbox, want := range map[string]bool{"sandbox-listed": true, "sandbox-unlisted": true, "sandbox-gone": false} {
		if _, err := os.Stat(filepath.Join(n.state, sandbox+"-eth0")); (err == nil) != want {
			t.Errorf("the default network's lease of %s: held %v, want %v", sandbox, err == nil, want)
		}
	}
}

// TestRuntimeGCWithoutClientBelievesNoEmptyAnswerOverCachedPods: without
// an API server client, a runtime that lists no sandbox while its libcni
// cache holds attachments (pods it attached itself, before hwnet, so
// without records) is not believed: their default network's leases stay.
func TestRuntimeGCWithoutClientBelievesNoEmptyAnswerOverCachedPods(t *testing.T) {
	n := newGCNode(t, nil, "node-noclient", cniplugins.Dir(t), nil)
	n.runtimeAdd(t, "sandbox-a", "a")
	n.cri.Set()
	if err := n.r.once(t.Context()); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.state, "sandbox-a-eth0")); err != nil {
		t.Errorf("an empty answer freed the default network's lease of a pod the runtime attached: %v", err)
	}
}

// runtimeAdd is the runtime's own ADD of the default network for the pod's
// sandbox (real libcni, its cache in the node's runtime cache directory),
// as old as one the runtime would long have listed.
func (n *gcNode) runtimeAdd(t *testing.T, sandbox, pod string) {
	t.Helper()
	list, err := libcni.ConfListFromBytes(n.def)
	if err != nil {
		t.Fatal(err)
	}
	runtime := libcni.NewCNIConfigWithCacheDir([]string{n.bin}, n.r.o.RuntimeCacheDir, nil)
	rt := &libcni.RuntimeConf{ContainerID: sandbox, NetNS: "/var/run/netns/" + sandbox, IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", gcNS}, {"K8S_POD_NAME", pod}}}
	if _, err := runtime.AddNetworkList(t.Context(), list, rt); err != nil {
		t.Fatalf("the runtime's ADD: %v", err)
	}
	old := time.Now().Add(-10 * time.Minute)
	if err := os.Chtimes(filepath.Join(n.r.o.RuntimeCacheDir, "results", "podnet-"+sandbox+"-eth0"), old, old); err != nil {
		t.Fatal(err)
	}
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
