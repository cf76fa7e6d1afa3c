package testkubelet

import (
	"context"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// watchBuffer is how many events a watcher may fall behind before it is
// cut off, as a slow client of a real server would be.
const watchBuffer = 1024

// Pods serves kubelet's Pods API (v1alpha1) from pods the test sets, as
// kubelet does from its pod manager: WatchPods sends an ADDED event per
// pod, then INITIAL_SYNC_COMPLETE, then an event per change.
type Pods struct {
	podsapi.UnimplementedPodsServer
	t      testing.TB
	server *grpc.Server

	mu       sync.Mutex
	pods     map[types.UID]*corev1.Pod
	watchers map[chan *podsapi.WatchPodsEvent]struct{}
	// held are the events of changes made while paused, in order.
	held   []*podsapi.WatchPodsEvent
	paused bool
	calls  map[string]int
}

// ServePods serves on the unix socket path until Close or the end of the
// test.
func ServePods(t testing.TB, path string) *Pods {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatalf("test kubelet pods API: %v", err)
	}
	p := &Pods{
		t:        t,
		server:   grpc.NewServer(),
		pods:     map[types.UID]*corev1.Pod{},
		watchers: map[chan *podsapi.WatchPodsEvent]struct{}{},
		calls:    map[string]int{},
	}
	podsapi.RegisterPodsServer(p.server, p)
	go p.server.Serve(l) //nolint:errcheck // ends with Close
	t.Cleanup(p.Close)
	return p
}

// Close stops serving, ending every watch.
func (p *Pods) Close() { p.server.Stop() }

// SetPod adds the pod, or replaces the pod of the same UID, and tells
// watchers (ADDED or MODIFIED).
func (p *Pods) SetPod(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	kind := podsapi.EventType_ADDED
	if _, ok := p.pods[pod.UID]; ok {
		kind = podsapi.EventType_MODIFIED
	}
	p.pods[pod.UID] = pod.DeepCopy()
	p.sendLocked(&podsapi.WatchPodsEvent{Type: kind, Pod: p.marshal(pod)})
}

// DeletePod removes the pod of that UID and tells watchers, with only its
// name, namespace and UID, as kubelet guarantees no more.
func (p *Pods) DeletePod(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pod, ok := p.pods[uid]
	if !ok {
		return
	}
	delete(p.pods, uid)
	gone := &corev1.Pod{}
	gone.Namespace, gone.Name, gone.UID = pod.Namespace, pod.Name, pod.UID
	p.sendLocked(&podsapi.WatchPodsEvent{Type: podsapi.EventType_DELETED, Pod: p.marshal(gone)})
}

// Pause holds back watch events, as kubelet's stream lags its pod manager:
// changes made while paused are seen by GetPod and ListPods at once and by
// watchers only on Resume.
func (p *Pods) Pause() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = true
}

// Resume sends the events held back since Pause.
func (p *Pods) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = false
	for _, ev := range p.held {
		p.sendLocked(ev)
	}
	p.held = nil
}

// Calls counts the calls of a method ("WatchPods", "ListPods", "GetPod").
func (p *Pods) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// sendLocked queues ev to every watcher; p.mu must be held.
func (p *Pods) sendLocked(ev *podsapi.WatchPodsEvent) {
	if p.paused {
		p.held = append(p.held, ev)
		return
	}
	for w := range p.watchers {
		select {
		case w <- ev:
		default:
			delete(p.watchers, w)
			close(w)
		}
	}
}

func (p *Pods) WatchPods(_ *podsapi.WatchPodsRequest, stream grpc.ServerStreamingServer[podsapi.WatchPodsEvent]) error {
	w := p.watch()
	defer p.unwatch(w)
	for {
		select {
		case ev, ok := <-w:
			if !ok {
				return status.Error(codes.ResourceExhausted, "watcher fell behind")
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return nil
		}
	}
}

// watch registers a watcher with the current pods already queued, so that
// no change falls between the initial list and the stream.
func (p *Pods) watch() chan *podsapi.WatchPodsEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["WatchPods"]++
	w := make(chan *podsapi.WatchPodsEvent, len(p.pods)+watchBuffer)
	for _, pod := range p.pods {
		w <- &podsapi.WatchPodsEvent{Type: podsapi.EventType_ADDED, Pod: p.marshal(pod)}
	}
	w <- &podsapi.WatchPodsEvent{Type: podsapi.EventType_INITIAL_SYNC_COMPLETE}
	p.watchers[w] = struct{}{}
	return w
}

func (p *Pods) unwatch(w chan *podsapi.WatchPodsEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.watchers, w)
}

func (p *Pods) ListPods(context.Context, *podsapi.ListPodsRequest) (*podsapi.ListPodsResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["ListPods"]++
	resp := &podsapi.ListPodsResponse{}
	for _, pod := range p.pods {
		resp.Pods = append(resp.Pods, p.marshal(pod))
	}
	return resp, nil
}

func (p *Pods) GetPod(_ context.Context, req *podsapi.GetPodRequest) (*podsapi.GetPodResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["GetPod"]++
	pod, ok := p.pods[types.UID(req.PodUID)]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod %s not found", req.PodUID)
	}
	return &podsapi.GetPodResponse{Pod: p.marshal(pod)}, nil
}

// marshal encodes a pod as kubelet does, with v1.Pod#Marshal.
func (p *Pods) marshal(pod *corev1.Pod) []byte {
	b, err := pod.Marshal()
	if err != nil {
		p.t.Errorf("test kubelet pods API: marshal pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
	return b
}
