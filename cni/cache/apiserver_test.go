package cache_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
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

func deletePod(t *testing.T, client kubernetes.Interface, namespace, name string) {
	t.Helper()
	zero := int64(0)
	err := client.CoreV1().Pods(namespace).Delete(ctxFor(t, 30*time.Second), name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	if err != nil {
		t.Fatalf("delete pod %s/%s: %v", namespace, name, err)
	}
}

func ref(p *corev1.Pod) cache.PodRef {
	return cache.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
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
	t.Run("InformerPodClaims", func(t *testing.T) { testInformerPodClaims(t, s, ns) })
	t.Run("InformerPodEnds", func(t *testing.T) { testInformerPodEnds(t, s, ns) })
}

// testInformerPodEnds: a pod whose phase says it ended no longer runs,
// and the cache tells of it as it ends and as it goes, so the device
// ledger asks kubelet for its devices then rather than at its next poll.
func testInformerPodEnds(t *testing.T, s *kubeapi.Server, ns string) {
	client := kubernetes.NewForConfigOrDie(s.Config())
	p := cache.NewInformerPods(client, "node-e", discard())
	var mu sync.Mutex
	var ended []string
	p.Notify(nil, func(pod cache.Pod) {
		mu.Lock()
		ended = append(ended, pod.Name)
		mu.Unlock()
	})
	run(t, p)
	job, web := s.CreatePod(t, ns, "job-0", "node-e", nil), s.CreatePod(t, ns, "web-0", "node-e", nil)
	kubeapi.WaitFor(t, "both pods running", func() bool { return p.Running(ns, "job-0", "") && p.Running(ns, "web-0", "") })
	job.Status.Phase = corev1.PodSucceeded
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctxFor(t, 30*time.Second), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeapi.WaitFor(t, "the job's pod ended", func() bool { return !p.Running(ns, "job-0", string(job.UID)) })
	deletePod(t, client, ns, "job-0")
	deletePod(t, client, ns, "web-0")
	want := []string{"job-0", "job-0", "web-0"}
	kubeapi.WaitFor(t, fmt.Sprintf("told of the ends %v", want), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(ended, want)
	})
	if p.Running(ns, "web-0", string(web.UID)) {
		t.Error("a deleted pod still runs")
	}
}

// testInformerPodClaims: the cached pod names its ResourceClaims, the
// shared one its spec names and the one made from a template that its
// status names, so that the DRA driver can find a shared claim kubelet
// prepared for another pod.
func testInformerPodClaims(t *testing.T, s *kubeapi.Server, ns string) {
	client := kubernetes.NewForConfigOrDie(s.Config())
	p := cache.NewInformerPods(client, "node-a", discard())
	run(t, p)
	shared, tmpl, made := "shared-vfs", "vf-template", "du-2-vfs-x7k2p"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "du-2"}, Spec: corev1.PodSpec{NodeName: "node-a",
		Containers:     []corev1.Container{{Name: "main", Image: "registry.invalid/pause"}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "shared", ResourceClaimName: &shared}, {Name: "own", ResourceClaimTemplateName: &tmpl}}}}
	created, err := client.CoreV1().Pods(ns).Create(ctxFor(t, 30*time.Second), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "own", ResourceClaimName: &made}}
	if _, err := client.CoreV1().Pods(ns).UpdateStatus(ctxFor(t, 30*time.Second), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{shared, made}
	kubeapi.WaitFor(t, "the cached pod names both claims", func() bool {
		got, err := lookup(p, ref(created), time.Second)
		return err == nil && reflect.DeepEqual(got.Claims, want)
	})
}

func testInformerPods(t *testing.T, s *kubeapi.Server, ns string) {
	cfg, counter := kubeapi.CountRequests(s.Config())
	p := cache.NewInformerPods(kubernetes.NewForConfigOrDie(cfg), "node-a", discard())
	run(t, p)
	existing := s.CreatePod(t, ns, "du-0", "node-a", map[string]string{networksAnnotation: "fronthaul"})
	elsewhere := s.CreatePod(t, ns, "du-other", "node-b", nil)
	kubeapi.WaitFor(t, "pod informer synced", p.HasSynced)

	got, err := lookup(p, ref(existing), 10*time.Second)
	want := cache.Pod{Namespace: ns, Name: "du-0", UID: string(existing.UID), Annotations: map[string]string{networksAnnotation: "fronthaul"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Pod(pod on the node) = %+v, %v; want %+v", got, err, want)
	}
	if _, err := lookup(p, ref(elsewhere), 200*time.Millisecond); !errors.Is(err, cache.ErrPodNotFound) {
		t.Errorf("Pod(pod on another node) error = %v, want ErrPodNotFound", err)
	}

	// A pod created after the lookup began, as when its sandbox is set up
	// before the informer heard of it.
	later := lookupLater(p, cache.PodRef{Namespace: ns, Name: "du-1"}, 30*time.Second)
	created := s.CreatePod(t, ns, "du-1", "node-a", nil)
	if r := <-later; r.err != nil || r.pod.UID != string(created.UID) {
		t.Errorf("Pod(pod created after the call) = %+v, %v; want uid %s", r.pod, r.err, created.UID)
	}

	// The same name again: the old UID must not find the new pod.
	deletePod(t, s.Client(), ns, "du-1")
	recreated := s.CreatePod(t, ns, "du-1", "node-a", nil)
	if r, err := lookup(p, ref(recreated), 30*time.Second); err != nil || r.UID != string(recreated.UID) {
		t.Errorf("Pod(recreated pod) = %+v, %v; want uid %s", r, err, recreated.UID)
	}
	if _, err := lookup(p, ref(created), 200*time.Millisecond); !errors.Is(err, cache.ErrPodNotFound) {
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
	src, how, err := cache.StartPods(ctx, cache.PodsOptions{
		KubeletSocket: filepath.Join(t.TempDir(), "no-such.sock"),
		Client:        s.Client(),
		NodeName:      "node-c",
		Logger:        discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(*cache.InformerPods); !ok || !strings.Contains(how, "informer") || !strings.Contains(how, "unavailable") {
		t.Errorf("StartPods chose %T (%q), want the informer and why", src, how)
	}
	pod := s.CreatePod(t, ns, "cu-0", "node-c", nil)
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
		nad.Annotations = map[string]string{cache.ResourceNameAnnotation: resource}
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
	n := cache.NewNADInformer(client, discard())
	run(t, n)
	kubeapi.WaitFor(t, "NAD informer synced", n.HasSynced)
	counter.Reset()

	tests := []struct {
		name      string
		namespace string
		nad       string
		want      cache.NAD
		wantErr   error
	}{
		{"3.2.1 config and resource name", ns, "fronthaul",
			cache.NAD{Namespace: ns, Name: "fronthaul", ResourceName: "hwnet.io/e810", Config: sriovConfig}, nil},
		{"3.2.4 no spec: an implementation-known network", ns, "implementation-known",
			cache.NAD{Namespace: ns, Name: "implementation-known"}, nil},
		{"missing", ns, "no-such-network", cache.NAD{}, cache.ErrNADNotFound},
		{"same name in another namespace", "default", "fronthaul", cache.NAD{}, cache.ErrNADNotFound},
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
			nad cache.NAD
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
		if _, err := n.NAD(ctx, ns, "no-such-network"); !errors.Is(err, cache.ErrNADNotFound) {
			t.Errorf("NAD(cancelled ctx) error = %v, want ErrNADNotFound", err)
		}
	})
}
