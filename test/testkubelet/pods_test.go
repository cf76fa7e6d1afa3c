package testkubelet_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/testkubelet"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

func testPod(name, uid string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ran", Name: name, UID: types.UID(uid), Annotations: annotations,
	}}
}

// podsClient connects to the server at path as a client of kubelet's Pods
// API would.
func podsClient(t *testing.T, path string) podsapi.PodsClient {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return podsapi.NewPodsClient(conn)
}

// event is a watch event as a test compares it.
type event struct {
	Type        podsapi.EventType
	Name, UID   string
	Annotations map[string]string
}

func recv(t *testing.T, stream grpc.ServerStreamingClient[podsapi.WatchPodsEvent]) event {
	t.Helper()
	ev, err := stream.Recv()
	if err != nil {
		t.Fatalf("Recv: %v", err)
	}
	got := event{Type: ev.GetType()}
	if ev.GetType() == podsapi.EventType_INITIAL_SYNC_COMPLETE {
		if len(ev.GetPod()) != 0 {
			t.Errorf("INITIAL_SYNC_COMPLETE carries a pod")
		}
		return got
	}
	var pod corev1.Pod
	if err := pod.Unmarshal(ev.GetPod()); err != nil {
		t.Fatalf("%s event: pod does not decode with v1.Pod#Unmarshal: %v", ev.GetType(), err)
	}
	got.Name, got.UID, got.Annotations = pod.Name, string(pod.UID), pod.Annotations
	return got
}

func TestPodsWatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods-api.sock")
	pods := testkubelet.ServePods(t, path)
	pods.SetPod(testPod("du-0", "u0", nil))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := podsClient(t, path).WatchPods(ctx, &podsapi.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name   string
		change func()
		want   []event
	}{
		{"existing pods, then the end of the list", func() {}, []event{
			{Type: podsapi.EventType_ADDED, Name: "du-0", UID: "u0"},
			{Type: podsapi.EventType_INITIAL_SYNC_COMPLETE},
		}},
		{"new pod", func() { pods.SetPod(testPod("du-1", "u1", nil)) }, []event{
			{Type: podsapi.EventType_ADDED, Name: "du-1", UID: "u1"},
		}},
		{"changed pod", func() { pods.SetPod(testPod("du-1", "u1", map[string]string{"a": "b"})) }, []event{
			{Type: podsapi.EventType_MODIFIED, Name: "du-1", UID: "u1", Annotations: map[string]string{"a": "b"}},
		}},
		{"deleted pod carries only its name and uid", func() { pods.DeletePod("u1") }, []event{
			{Type: podsapi.EventType_DELETED, Name: "du-1", UID: "u1"},
		}},
		{"held back while paused", func() {
			pods.Pause()
			pods.SetPod(testPod("du-2", "u2", nil))
			pods.DeletePod("u0")
			pods.Resume()
		}, []event{
			{Type: podsapi.EventType_ADDED, Name: "du-2", UID: "u2"},
			{Type: podsapi.EventType_DELETED, Name: "du-0", UID: "u0"},
		}},
	}
	for _, step := range steps {
		step.change()
		for i, want := range step.want {
			if got := recv(t, stream); !equalEvent(got, want) {
				t.Errorf("%s: event %d = %+v, want %+v", step.name, i, got, want)
			}
		}
	}
}

func equalEvent(a, b event) bool {
	if a.Type != b.Type || a.Name != b.Name || a.UID != b.UID || len(a.Annotations) != len(b.Annotations) {
		return false
	}
	for k, v := range a.Annotations {
		if b.Annotations[k] != v {
			return false
		}
	}
	return true
}

func TestPodsGetAndList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "pods-api.sock")
	pods := testkubelet.ServePods(t, path)
	pods.Pause() // GetPod and ListPods see pods the watch has not reported
	pods.SetPod(testPod("du-0", "u0", nil))
	api := podsClient(t, path)
	ctx := context.Background()

	resp, err := api.GetPod(ctx, &podsapi.GetPodRequest{PodUID: "u0"})
	if err != nil {
		t.Fatalf("GetPod(u0): %v", err)
	}
	var pod corev1.Pod
	if err := pod.Unmarshal(resp.GetPod()); err != nil || pod.Name != "du-0" {
		t.Errorf("GetPod(u0) = pod %q (%v), want du-0", pod.Name, err)
	}
	if _, err := api.GetPod(ctx, &podsapi.GetPodRequest{PodUID: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetPod(unknown uid) = %v, want code NotFound", err)
	}
	list, err := api.ListPods(ctx, &podsapi.ListPodsRequest{})
	if err != nil || len(list.GetPods()) != 1 {
		t.Errorf("ListPods = %d pods (%v), want 1", len(list.GetPods()), err)
	}
	if got := pods.Calls("GetPod"); got != 2 {
		t.Errorf("Calls(GetPod) = %d, want 2", got)
	}
}
