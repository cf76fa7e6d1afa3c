package cache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/testkubelet"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const networksAnnotation = "k8s.v1.cni.cncf.io/networks"

func discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func kubePod(namespace, name, uid string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: types.UID(uid), Annotations: annotations,
	}}
}

// runKubeletPods runs a KubeletPods on a test kubelet until the test ends
// and returns once it has kubelet's list.
func runKubeletPods(t *testing.T, socket string) *cache.KubeletPods {
	t.Helper()
	k := cache.NewKubeletPods(socket, discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	kubeapi.WaitFor(t, "kubelet pods synced", k.HasSynced)
	return k
}

// lookup asks src for ref, bounded by d.
func lookup(src cache.PodSource, ref cache.PodRef, d time.Duration) (cache.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return src.Pod(ctx, ref)
}

// lookupLater starts a lookup now and returns its outcome when it ends.
func lookupLater(src cache.PodSource, ref cache.PodRef, d time.Duration) <-chan result {
	out := make(chan result, 1)
	go func() {
		p, err := lookup(src, ref, d)
		out <- result{p, err}
	}()
	return out
}

// lookupLaterAsked starts a lookup of a pod kubelet does not hold yet and
// returns once the lookup has asked kubelet for it (GetPod), so that what
// the test does next happens after the call, not before it.
func lookupLaterAsked(t *testing.T, server *testkubelet.Pods, src cache.PodSource, ref cache.PodRef) <-chan result {
	t.Helper()
	asked := server.Calls("GetPod")
	later := lookupLater(src, ref, 10*time.Second)
	kubeapi.WaitFor(t, "the lookup to ask kubelet", func() bool { return server.Calls("GetPod") > asked })
	return later
}

type result struct {
	pod cache.Pod
	err error
}

func TestKubeletPods(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "du-0", "u0", map[string]string{networksAnnotation: "fronthaul"}))
	k := runKubeletPods(t, socket)

	p, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-0", UID: "u0"}, time.Second)
	want := cache.Pod{Namespace: "ran", Name: "du-0", UID: "u0", Annotations: map[string]string{networksAnnotation: "fronthaul"}}
	if err != nil || !reflect.DeepEqual(p, want) {
		t.Errorf("Pod(listed pod) = %+v, %v; want %+v", p, err, want)
	}

	// A sandbox is often set up a moment after its pod reaches kubelet.
	later := lookupLaterAsked(t, server, k, cache.PodRef{Namespace: "ran", Name: "du-1", UID: "u1"})
	server.SetPod(kubePod("ran", "du-1", "u1", nil))
	if r := <-later; r.err != nil || r.pod.UID != "u1" {
		t.Errorf("Pod(pod added after the call) = %+v, %v; want uid u1", r.pod, r.err)
	}

	server.SetPod(kubePod("ran", "du-1", "u1", map[string]string{networksAnnotation: "midhaul"}))
	kubeapi.WaitFor(t, "the changed annotation", func() bool {
		p, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-1", UID: "u1"}, time.Second)
		return err == nil && p.Annotations[networksAnnotation] == "midhaul"
	})

	server.DeletePod("u1")
	kubeapi.WaitFor(t, "the deleted pod to leave the cache", func() bool {
		_, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-1"}, 10*time.Millisecond)
		return errors.Is(err, cache.ErrPodNotFound)
	})
}

// Notify tells of pods as kubelet's stream brings them: listed, added and
// changed, each with its annotations, so the CNI side can act before a
// sandbox's ADD asks; and of each pod that ends or goes, once each, so the
// device ledger can ask kubelet for its devices at once.
func TestKubeletPodsNotify(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "du-0", "u0", map[string]string{networksAnnotation: "fronthaul"}))
	k := cache.NewKubeletPods(socket, discard())
	var mu sync.Mutex
	var told, ended []string
	k.Notify(func(p cache.Pod) {
		mu.Lock()
		told = append(told, p.UID+"="+p.Annotations[networksAnnotation])
		mu.Unlock()
	}, func(p cache.Pod) {
		mu.Lock()
		ended = append(ended, p.UID)
		mu.Unlock()
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go k.Run(ctx)
	kubeapi.WaitFor(t, "kubelet pods synced", k.HasSynced)
	server.SetPod(kubePod("ran", "du-1", "u1", map[string]string{networksAnnotation: "midhaul"}))
	done := kubePod("ran", "du-1", "u1", map[string]string{networksAnnotation: "midhaul"})
	done.Status.Phase = corev1.PodSucceeded
	server.SetPod(done)
	server.SetPod(done)
	server.DeletePod("u1")
	server.DeletePod("u0")
	want := []string{"u0=fronthaul", "u1=midhaul", "u1=midhaul", "u1=midhaul"}
	wantEnded := []string{"u1", "u1", "u0"}
	kubeapi.WaitFor(t, fmt.Sprintf("Notify to be told %v and of ends %v", want, wantEnded), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Equal(told, want) && slices.Equal(ended, wantEnded)
	})
}

func TestKubeletPodsCopiesAnnotations(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "du-0", "u0", map[string]string{networksAnnotation: "fronthaul"}))
	k := runKubeletPods(t, socket)
	ref := cache.PodRef{Namespace: "ran", Name: "du-0", UID: "u0"}
	p, err := lookup(k, ref, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[networksAnnotation] = "changed by a caller"
	if p, _ := lookup(k, ref, time.Second); p.Annotations[networksAnnotation] != "fronthaul" {
		t.Errorf("a caller's change of the returned annotations reached the cache: %q", p.Annotations[networksAnnotation])
	}
}

// TestKubeletPodsUID checks that a pod is found by its UID only: a
// StatefulSet's pod is deleted and created again under the same name, and
// the sandbox of the new one must not get the old one's annotations.
func TestKubeletPodsUID(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "web-0", "old", map[string]string{networksAnnotation: "old-net"}))
	k := runKubeletPods(t, socket)

	later := lookupLaterAsked(t, server, k, cache.PodRef{Namespace: "ran", Name: "web-0", UID: "new"})
	server.DeletePod("old")
	server.SetPod(kubePod("ran", "web-0", "new", map[string]string{networksAnnotation: "new-net"}))
	if r := <-later; r.err != nil || r.pod.Annotations[networksAnnotation] != "new-net" {
		t.Errorf("Pod(new uid) = %+v, %v; want the new pod", r.pod, r.err)
	}

	tests := []struct {
		name    string
		ref     cache.PodRef
		wantErr string // empty: found
	}{
		{"stale uid", cache.PodRef{Namespace: "ran", Name: "web-0", UID: "old"}, "holds a pod of that name with uid new"},
		{"uid of another name", cache.PodRef{Namespace: "ran", Name: "web-1", UID: "new"}, "no pod of that name"},
		{"uid in another namespace", cache.PodRef{Namespace: "core", Name: "web-0", UID: "new"}, "no pod of that name"},
		{"empty uid accepts the pod of that name", cache.PodRef{Namespace: "ran", Name: "web-0"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := lookup(k, tt.ref, 50*time.Millisecond)
			if tt.wantErr == "" {
				if err != nil || p.UID != "new" {
					t.Errorf("Pod(%s) = %+v, %v; want uid new", tt.ref, p, err)
				}
				return
			}
			if !errors.Is(err, cache.ErrPodNotFound) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Pod(%s) error = %v; want ErrPodNotFound and DeadlineExceeded saying %q", tt.ref, err, tt.wantErr)
			}
		})
	}
}

// TestKubeletPodsGetPodOnMiss checks that a pod kubelet knows but whose
// watch event has not arrived yet is asked for with GetPod.
func TestKubeletPodsGetPodOnMiss(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	k := runKubeletPods(t, socket)
	server.Pause()
	server.SetPod(kubePod("ran", "du-0", "u0", map[string]string{networksAnnotation: "fronthaul"}))

	p, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-0", UID: "u0"}, 10*time.Second)
	if err != nil || p.Annotations[networksAnnotation] != "fronthaul" {
		t.Errorf("Pod(pod not yet watched) = %+v, %v; want it from GetPod", p, err)
	}
	if got := server.Calls("GetPod"); got != 1 {
		t.Errorf("GetPod calls = %d, want 1", got)
	}
	// GetPod takes a UID: without one the lookup can only wait.
	if _, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-0"}, 50*time.Millisecond); !errors.Is(err, cache.ErrPodNotFound) {
		t.Errorf("Pod(no uid, not yet watched) error = %v, want ErrPodNotFound", err)
	}
	// GetPod's answer must be the pod asked for.
	if _, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-9", UID: "u0"}, 50*time.Millisecond); !errors.Is(err, cache.ErrPodNotFound) {
		t.Errorf("Pod(uid of another pod) error = %v, want ErrPodNotFound", err)
	}
	if got := server.Calls("GetPod"); got != 2 {
		t.Errorf("GetPod calls = %d, want 2", got)
	}
	if got := server.Calls("ListPods"); got != 0 {
		t.Errorf("ListPods calls = %d, want 0: the watch lists", got)
	}
}

// TestKubeletPodsRestart checks that a restarted kubelet's list replaces
// the cache: pods deleted while it was down leave it.
func TestKubeletPodsRestart(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "du-0", "u0", nil))
	k := runKubeletPods(t, socket)
	if _, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-0", UID: "u0"}, time.Second); err != nil {
		t.Fatal(err)
	}

	server.Close()
	server = testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "du-1", "u1", nil))

	if _, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-1", UID: "u1"}, 10*time.Second); err != nil {
		t.Errorf("Pod(pod of the restarted kubelet): %v", err)
	}
	// The list ends with INITIAL_SYNC_COMPLETE, a moment after du-1.
	kubeapi.WaitFor(t, "the pod gone while kubelet was down to leave the cache", func() bool {
		_, err := lookup(k, cache.PodRef{Namespace: "ran", Name: "du-0", UID: "u0"}, 10*time.Millisecond)
		return errors.Is(err, cache.ErrPodNotFound)
	})
}

// TestKubeletPodsUnavailable checks that Run gives up on a kubelet without
// the Pods API, so that the caller falls back to an informer.
func TestKubeletPodsUnavailable(t *testing.T) {
	tests := []struct {
		name  string
		serve func(t *testing.T, socket string)
	}{
		{"no socket", func(*testing.T, string) {}},
		{"kubelet before the Pods API (Unimplemented)", func(t *testing.T, socket string) {
			pr, err := testkubelet.ServePodResources(socket)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pr.Close)
		}},
		{"stale socket nobody serves", func(t *testing.T, socket string) {
			l, err := net.Listen("unix", socket)
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			socket := filepath.Join(t.TempDir(), "pods-api.sock")
			tt.serve(t, socket)
			// Run ends with nil when ctx does: the timeout is well beyond
			// the few seconds Run may take to give up.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			k := cache.NewKubeletPods(socket, discard())
			if err := k.Run(ctx); !errors.Is(err, cache.ErrPodsAPIUnavailable) {
				t.Errorf("Run = %v, want ErrPodsAPIUnavailable", err)
			}
			if k.HasSynced() {
				t.Error("HasSynced = true")
			}
		})
	}
}

func TestStartPodsPrefersKubelet(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	server := testkubelet.ServePods(t, socket)
	server.SetPod(kubePod("ran", "du-0", "u0", nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src, how, err := cache.StartPods(ctx, cache.PodsOptions{KubeletSocket: socket, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(*cache.KubeletPods); !ok || !strings.Contains(how, "kubelet Pods API") {
		t.Errorf("StartPods chose %T (%q), want the kubelet Pods API", src, how)
	}
	if _, err := lookup(src, cache.PodRef{Namespace: "ran", Name: "du-0", UID: "u0"}, time.Second); err != nil {
		t.Error(err)
	}
}

func TestStartPodsWithoutFallback(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	socket := filepath.Join(t.TempDir(), "pods-api.sock")
	_, _, err := cache.StartPods(ctx, cache.PodsOptions{KubeletSocket: socket, Logger: discard()})
	if !errors.Is(err, cache.ErrPodsAPIUnavailable) || !strings.Contains(err.Error(), "no API client") {
		t.Errorf("StartPods(no kubelet API, no client) error = %v, want ErrPodsAPIUnavailable saying no API client", err)
	}
}
