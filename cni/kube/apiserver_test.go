package kube_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/kube"
	netstatus "github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const nadCRD = "../../deploy/crds/network-attachment-definition.yaml"

// apiServer starts a real kube-apiserver with the NetworkAttachmentDefinition
// CRD and a namespace for the test.
func apiServer(t *testing.T, namespace string) *kubeapi.Server {
	t.Helper()
	kubeapi.Binaries(t)
	s := kubeapi.Start(t)
	s.ApplyCRD(t, nadCRD)
	s.CreateNamespace(t, namespace)
	return s
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createPod creates a pod bound to node and returns it as created.
func createPod(t *testing.T, client kubernetes.Interface, namespace, name, node string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "main", Image: "registry.invalid/pause"}},
		},
	}
	created, err := client.CoreV1().Pods(namespace).Create(ctxFor(t, 30*time.Second), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create pod %s/%s: %v", namespace, name, err)
	}
	return created
}

func deletePod(t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	zero := int64(0)
	err := client.CoreV1().Pods(namespace).Delete(ctxFor(t, 30*time.Second), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil {
		t.Fatalf("delete pod %s/%s: %v", namespace, name, err)
	}
}

func ref(p *corev1.Pod) kube.PodRef {
	return kube.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// run runs r until the test ends.
func run(t *testing.T, r interface{ Run(context.Context) error }) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// reads keeps the requests that read from the API server.
func reads(counts map[string]int) map[string]int {
	out := map[string]int{}
	for key, n := range counts {
		if strings.HasPrefix(key, "GET ") || strings.HasPrefix(key, "LIST ") {
			out[key] = n
		}
	}
	return out
}

// TestAPIServer runs the tests that share one API server.
func TestAPIServer(t *testing.T) {
	const ns = "ran"
	s := apiServer(t, ns)
	t.Run("InformerPods", func(t *testing.T) { testInformerPods(t, s, ns) })
	t.Run("StartPodsFallsBackToInformer", func(t *testing.T) { testStartPodsFallback(t, s, ns) })
	t.Run("Spec3_2_NAD", func(t *testing.T) { testNADInformer(t, s, ns) })
	t.Run("Spec5_SetNetworkStatus", func(t *testing.T) { testSetNetworkStatus(t, s, ns) })
	t.Run("Event", func(t *testing.T) { testEvent(t, s, ns) })
	t.Run("RESTConfig", func(t *testing.T) { testRESTConfig(t, s, ns) })
}

func testInformerPods(t *testing.T, s *kubeapi.Server, ns string) {
	cfg, counter := kubeapi.CountRequests(s.Config())
	p := kube.NewInformerPods(kubernetes.NewForConfigOrDie(cfg), "node-a", discard())
	run(t, p)
	existing := createPod(t, s.Client(), ns, "du-0", "node-a", map[string]string{networksAnnotation: "fronthaul"})
	elsewhere := createPod(t, s.Client(), ns, "du-other", "node-b", nil)
	waitFor(t, "pod informer synced", p.HasSynced)

	got, err := lookup(p, ref(existing), 10*time.Second)
	want := kube.Pod{Namespace: ns, Name: "du-0", UID: string(existing.UID), Annotations: map[string]string{networksAnnotation: "fronthaul"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Pod(pod on the node) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := lookup(p, ref(elsewhere), 200*time.Millisecond); !errors.Is(err, kube.ErrPodNotFound) {
		t.Errorf("Pod(pod on another node) error = %v, want ErrPodNotFound", err)
	}

	// A pod created after the lookup began, as when its sandbox is set up
	// before the informer heard of it.
	later := lookupLater(p, kube.PodRef{Namespace: ns, Name: "du-1"}, 30*time.Second)
	created := createPod(t, s.Client(), ns, "du-1", "node-a", nil)
	if r := <-later; r.err != nil || r.pod.UID != string(created.UID) {
		t.Errorf("Pod(pod created after the call) = %+v, %v; want uid %s", r.pod, r.err, created.UID)
	}

	// The same name again: the old UID must not find the new pod.
	deletePod(t, s.Client(), ns, "du-1")
	recreated := createPod(t, s.Client(), ns, "du-1", "node-a", nil)
	if r, err := lookup(p, ref(recreated), 30*time.Second); err != nil || r.UID != string(recreated.UID) {
		t.Errorf("Pod(recreated pod) = %+v, %v; want uid %s", r, err, recreated.UID)
	}
	if _, err := lookup(p, ref(created), 200*time.Millisecond); !errors.Is(err, kube.ErrPodNotFound) {
		t.Errorf("Pod(stale uid) error = %v, want ErrPodNotFound", err)
	}

	counter.Reset()
	for range 100 {
		if _, err := lookup(p, ref(existing), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if r := reads(counter.Snapshot()); len(r) != 0 {
		t.Errorf("lookups read from the API server: %v", r)
	}
}

func testStartPodsFallback(t *testing.T, s *kubeapi.Server, ns string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	src, how, err := kube.StartPods(ctx, kube.PodsOptions{
		KubeletSocket: filepath.Join(t.TempDir(), "no-such.sock"),
		Client:        s.Client(),
		NodeName:      "node-c",
		Logger:        discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(*kube.InformerPods); !ok || !strings.Contains(how, "informer") || !strings.Contains(how, "unavailable") {
		t.Errorf("StartPods chose %T (%q), want the informer and why", src, how)
	}
	pod := createPod(t, s.Client(), ns, "cu-0", "node-c", nil)
	if _, err := lookup(src, ref(pod), 30*time.Second); err != nil {
		t.Errorf("Pod through the fallback informer: %v", err)
	}
}

func createNAD(t *testing.T, client nadclient.Interface, namespace, name, resource, config string) {
	t.Helper()
	nad := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
	if resource != "" {
		nad.Annotations = map[string]string{kube.ResourceNameAnnotation: resource}
	}
	if _, err := client.K8sCniCncfIoV1().NetworkAttachmentDefinitions(namespace).Create(ctxFor(t, 30*time.Second), nad, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create NetworkAttachmentDefinition %s/%s: %v", namespace, name, err)
	}
}

const sriovConfig = `{"cniVersion":"1.0.0","name":"fronthaul","type":"host-device"}`

func testNADInformer(t *testing.T, s *kubeapi.Server, ns string) {
	cfg, counter := kubeapi.CountRequests(s.Config())
	client := nadclient.NewForConfigOrDie(cfg)
	createNAD(t, client, ns, "fronthaul", "hwnet.io/e810", sriovConfig)
	createNAD(t, client, ns, "implementation-known", "", "")
	n := kube.NewNADInformer(client, discard())
	run(t, n)
	waitFor(t, "NAD informer synced", n.HasSynced)
	counter.Reset()

	tests := []struct {
		name      string
		namespace string
		nad       string
		want      kube.NAD
		wantErr   error
	}{
		{"3.2.1 config and resource name", ns, "fronthaul",
			kube.NAD{Namespace: ns, Name: "fronthaul", ResourceName: "hwnet.io/e810", Config: sriovConfig}, nil},
		{"3.2.4 no spec: an implementation-known network", ns, "implementation-known",
			kube.NAD{Namespace: ns, Name: "implementation-known"}, nil},
		{"missing", ns, "no-such-network", kube.NAD{}, kube.ErrNADNotFound},
		{"same name in another namespace", "default", "fronthaul", kube.NAD{}, kube.ErrNADNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := n.NAD(ctxFor(t, 10*time.Second), tt.namespace, tt.nad)
			if !errors.Is(err, tt.wantErr) || got != tt.want {
				t.Errorf("NAD(%s/%s) = %+v, %v; want %+v, %v", tt.namespace, tt.nad, got, err, tt.want, tt.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tt.namespace+"/"+tt.nad) {
				t.Errorf("error %q does not name %s/%s", err, tt.namespace, tt.nad)
			}
		})
	}
	if r := reads(counter.Snapshot()); len(r) != 0 {
		t.Errorf("lookups read from the API server: %v", r)
	}

	t.Run("created just after the lookup began", func(t *testing.T) {
		type nadResult struct {
			nad kube.NAD
			err error
		}
		later := make(chan nadResult, 1)
		go func() {
			nad, err := n.NAD(context.Background(), ns, "late")
			later <- nadResult{nad, err}
		}()
		createNAD(t, nadclient.NewForConfigOrDie(s.Config()), ns, "late", "", sriovConfig)
		if r := <-later; r.err != nil || r.nad.Config != sriovConfig {
			t.Errorf("NAD(late) = %+v, %v; want it once created", r.nad, r.err)
		}
	})

	t.Run("lookup bounded by ctx", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := n.NAD(ctx, ns, "no-such-network"); !errors.Is(err, kube.ErrNADNotFound) {
			t.Errorf("NAD(cancelled ctx) error = %v, want ErrNADNotFound", err)
		}
	})
}

func testSetNetworkStatus(t *testing.T, s *kubeapi.Server, ns string) {
	const status = `[{"name":"ran/fronthaul","interface":"net1","default":false}]`
	others := map[string]string{networksAnnotation: "fronthaul", "example.com/owner": "ran-team"}
	pod := createPod(t, s.Client(), ns, "status-0", "node-a", others)
	other := createPod(t, s.Client(), ns, "status-1", "node-a", nil)

	tests := []struct {
		name      string
		pod       kube.PodRef
		wantErr   error
		wantCalls map[string]int
	}{
		{"5 one PATCH, no read", ref(pod), nil, map[string]int{"PATCH pods": 1}},
		{"another pod's UID is refused", kube.PodRef{Namespace: ns, Name: "status-0", UID: string(other.UID)},
			kube.ErrPodGone, map[string]int{"PATCH pods": 1}},
		{"deleted pod", kube.PodRef{Namespace: ns, Name: "no-such-pod", UID: string(other.UID)},
			kube.ErrPodGone, map[string]int{"PATCH pods": 1}},
		{"no UID", kube.PodRef{Namespace: ns, Name: "status-0"}, errAny, map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, counter := kubeapi.CountRequests(s.Config())
			w := kube.NewStatusWriter(kubernetes.NewForConfigOrDie(cfg), "hwnet-agent", discard())
			defer w.Shutdown()
			err := w.SetNetworkStatus(ctxFor(t, 30*time.Second), tt.pod, map[string]string{netstatus.Annotation: status})
			if !matches(err, tt.wantErr) {
				t.Errorf("SetNetworkStatus(%s) error = %v, want %v", tt.pod, err, tt.wantErr)
			}
			if got := counter.Snapshot(); !reflect.DeepEqual(got, tt.wantCalls) {
				t.Errorf("requests = %v, want %v", got, tt.wantCalls)
			}
		})
	}

	got, err := s.Client().CoreV1().Pods(ns).Get(ctxFor(t, 30*time.Second), "status-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{netstatus.Annotation: status}
	for k, v := range others {
		want[k] = v
	}
	if !reflect.DeepEqual(got.Annotations, want) {
		t.Errorf("annotations after SetNetworkStatus = %v, want %v", got.Annotations, want)
	}
}

// errAny stands for any error in a table.
var errAny = errors.New("any error")

func matches(err, want error) bool {
	if want == errAny {
		return err != nil
	}
	return errors.Is(err, want)
}

func testEvent(t *testing.T, s *kubeapi.Server, ns string) {
	pod := createPod(t, s.Client(), ns, "event-0", "node-a", nil)
	w := kube.NewStatusWriter(s.Client(), "hwnet-agent", discard())
	w.Event(ref(pod), corev1.EventTypeWarning, "NetworkNotFound", "NetworkAttachmentDefinition ran/nope not found")
	w.Shutdown() // writes the queued Event
	w.Event(ref(pod), corev1.EventTypeNormal, "AfterShutdown", "dropped")

	events, err := s.Client().CoreV1().Events(ns).List(ctxFor(t, 30*time.Second), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "event-0").String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events.Items) != 1 {
		t.Fatalf("%d Events about the pod, want 1: %+v", len(events.Items), events.Items)
	}
	e := events.Items[0]
	if e.Type != corev1.EventTypeWarning || e.Reason != "NetworkNotFound" || e.Source.Component != "hwnet-agent" ||
		e.InvolvedObject.Kind != "Pod" || e.InvolvedObject.UID != pod.UID {
		t.Errorf("Event = type %s reason %s source %s about %s %s, want Warning NetworkNotFound from hwnet-agent about Pod %s",
			e.Type, e.Reason, e.Source.Component, e.InvolvedObject.Kind, e.InvolvedObject.UID, pod.UID)
	}
}

// testRESTConfig checks the configuration RESTConfig builds from a
// kubeconfig file serves both built-in objects (as protobuf) and the
// NetworkAttachmentDefinition custom resource (as JSON).
func testRESTConfig(t *testing.T, s *kubeapi.Server, ns string) {
	cfg, err := kube.RESTConfig(writeKubeconfig(t, s.Config()))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS < 20 || cfg.Burst < 40 {
		t.Errorf("QPS %v, burst %d: too low to patch a node's pods as they start", cfg.QPS, cfg.Burst)
	}
	pods := kube.NewInformerPods(kubernetes.NewForConfigOrDie(cfg), "node-a", discard())
	nads := kube.NewNADInformer(nadclient.NewForConfigOrDie(cfg), discard())
	run(t, pods)
	run(t, nads)
	pod := createPod(t, s.Client(), ns, "config-0", "node-a", nil)
	createNAD(t, nadclient.NewForConfigOrDie(s.Config()), ns, "config-net", "", sriovConfig)
	if _, err := lookup(pods, ref(pod), 30*time.Second); err != nil {
		t.Errorf("Pod through RESTConfig's client: %v", err)
	}
	if _, err := nads.NAD(ctxFor(t, 30*time.Second), ns, "config-net"); err != nil {
		t.Errorf("NAD through RESTConfig's client: %v", err)
	}
	w := kube.NewStatusWriter(kubernetes.NewForConfigOrDie(cfg), "hwnet-agent", discard())
	defer w.Shutdown()
	if err := w.SetNetworkStatus(ctxFor(t, 30*time.Second), ref(pod), map[string]string{netstatus.Annotation: "[]"}); err != nil {
		t.Errorf("SetNetworkStatus through RESTConfig's client: %v", err)
	}
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRESTConfigErrors(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	missing := filepath.Join(t.TempDir(), "no-such-kubeconfig")
	tests := []struct {
		name       string
		kubeconfig string
		want       string
	}{
		{"missing kubeconfig file", missing, missing},
		{"no kubeconfig outside a cluster", "", rest.ErrNotInCluster.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := kube.RESTConfig(tt.kubeconfig); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RESTConfig(%q) error = %v, want one saying %q", tt.kubeconfig, err, tt.want)
			}
		})
	}
}

// TestSetNetworkStatusAcrossAPIServerRestart checks that a PATCH sent while
// the API server is down lands once it is back, within the caller's
// deadline.
func TestSetNetworkStatusAcrossAPIServerRestart(t *testing.T) {
	const ns = "ran"
	s := apiServer(t, ns)
	pod := createPod(t, s.Client(), ns, "du-0", "node-a", nil)
	cfg, counter := kubeapi.CountRequests(s.Config())
	w := kube.NewStatusWriter(kubernetes.NewForConfigOrDie(cfg), "hwnet-agent", discard())
	defer w.Shutdown()

	s.Stop(t)
	done := make(chan error, 1)
	go func() {
		done <- w.SetNetworkStatus(ctxFor(t, 2*time.Minute), ref(pod), map[string]string{netstatus.Annotation: "[]"})
	}()
	waitFor(t, "a PATCH to fail", func() bool { return counter.Snapshot()["PATCH pods"] >= 2 })
	s.Restart(t)
	if err := <-done; err != nil {
		t.Fatalf("SetNetworkStatus across a restart: %v", err)
	}
	got, err := s.Client().CoreV1().Pods(ns).Get(ctxFor(t, 30*time.Second), "du-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[netstatus.Annotation] != "[]" {
		t.Errorf("network-status = %q after the restart, want []", got.Annotations[netstatus.Annotation])
	}
	if reads := reads(counter.Snapshot()); len(reads) != 0 {
		t.Errorf("SetNetworkStatus read from the API server: %v", reads)
	}
}

func TestSetNetworkStatusGivesUpWithCtx(t *testing.T) {
	const ns = "ran"
	s := apiServer(t, ns)
	pod := createPod(t, s.Client(), ns, "du-0", "node-a", nil)
	w := kube.NewStatusWriter(s.Client(), "hwnet-agent", discard())
	defer w.Shutdown()
	s.Stop(t)
	err := w.SetNetworkStatus(ctxFor(t, time.Second), ref(pod), map[string]string{netstatus.Annotation: "[]"})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("SetNetworkStatus with the API server down = %v, want DeadlineExceeded after some attempts", err)
	}
}
