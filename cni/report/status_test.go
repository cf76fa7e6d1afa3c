package report_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/report"
	netstatus "github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// apiServer starts a real kube-apiserver with a namespace for the test.
func apiServer(t *testing.T, namespace string) *kubeapi.Server {
	t.Helper()
	kubeapi.Binaries(t)
	s := kubeapi.Start(t)
	s.CreateNamespace(t, namespace)
	return s
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func ref(p *corev1.Pod) cache.PodRef {
	return cache.PodRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// TestAPIServer runs the tests that share one API server.
func TestAPIServer(t *testing.T) {
	const ns = "ran"
	s := apiServer(t, ns)
	t.Run("Spec5_SetNetworkStatus", func(t *testing.T) { testSetNetworkStatus(t, s, ns) })
	t.Run("Event", func(t *testing.T) { testEvent(t, s, ns) })
}

func testSetNetworkStatus(t *testing.T, s *kubeapi.Server, ns string) {
	const status = `[{"name":"ran/fronthaul","interface":"net1","default":false}]`
	others := map[string]string{"k8s.v1.cni.cncf.io/networks": "fronthaul", "example.com/owner": "ran-team"}
	pod := s.CreatePod(t, ns, "status-0", "node-a", others)
	other := s.CreatePod(t, ns, "status-1", "node-a", nil)

	tests := []struct {
		name      string
		pod       cache.PodRef
		wantErr   error
		wantCalls map[string]int
	}{
		{"5 one PATCH, no read", ref(pod), nil, map[string]int{"PATCH pods": 1}},
		{"another pod's UID is refused", cache.PodRef{Namespace: ns, Name: "status-0", UID: string(other.UID)},
			report.ErrPodGone, map[string]int{"PATCH pods": 1}},
		{"deleted pod", cache.PodRef{Namespace: ns, Name: "no-such-pod", UID: string(other.UID)},
			report.ErrPodGone, map[string]int{"PATCH pods": 1}},
		{"no UID", cache.PodRef{Namespace: ns, Name: "status-0"}, errAny, map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, counter := kubeapi.CountRequests(s.Config())
			w := report.NewStatusWriter(kubernetes.NewForConfigOrDie(cfg), "hwnet-agent", discard())
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
	pod := s.CreatePod(t, ns, "event-0", "node-a", nil)
	w := report.NewStatusWriter(s.Client(), "hwnet-agent", discard())
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

// TestSetNetworkStatusAcrossAPIServerRestart checks that a PATCH sent while
// the API server is down lands once it is back, within the caller's
// deadline.
func TestSetNetworkStatusAcrossAPIServerRestart(t *testing.T) {
	const ns = "ran"
	s := apiServer(t, ns)
	pod := s.CreatePod(t, ns, "du-0", "node-a", nil)
	cfg, counter := kubeapi.CountRequests(s.Config())
	w := report.NewStatusWriter(kubernetes.NewForConfigOrDie(cfg), "hwnet-agent", discard())
	defer w.Shutdown()

	s.Stop(t)
	done := make(chan error, 1)
	go func() {
		done <- w.SetNetworkStatus(ctxFor(t, 2*time.Minute), ref(pod), map[string]string{netstatus.Annotation: "[]"})
	}()
	kubeapi.WaitFor(t, "a PATCH to fail", func() bool { return counter.Snapshot()["PATCH pods"] >= 2 })
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
	for key := range counter.Snapshot() {
		if !strings.HasPrefix(key, "PATCH ") {
			t.Errorf("SetNetworkStatus sent %s: want PATCHes only", key)
		}
	}
}

func TestSetNetworkStatusGivesUpWithCtx(t *testing.T) {
	const ns = "ran"
	s := apiServer(t, ns)
	pod := s.CreatePod(t, ns, "du-0", "node-a", nil)
	w := report.NewStatusWriter(s.Client(), "hwnet-agent", discard())
	defer w.Shutdown()
	s.Stop(t)
	err := w.SetNetworkStatus(ctxFor(t, time.Second), ref(pod), map[string]string{netstatus.Annotation: "[]"})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "attempts") {
		t.Errorf("SetNetworkStatus with the API server down = %v, want DeadlineExceeded after some attempts", err)
	}
}
