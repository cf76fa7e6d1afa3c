package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	podsapi "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// DefaultPodsSocket is where kubelet serves its Pods API.
const DefaultPodsSocket = "/var/lib/kubelet/pods-api/pods-api.sock"

// ErrPodsAPIUnavailable says kubelet does not serve its Pods API: no
// socket, the API unimplemented (kubelet before 1.37 or its feature gate
// off), or no answer in time.
var ErrPodsAPIUnavailable = errors.New("kubelet Pods API unavailable")

const (
	// podsStartTimeout bounds the wait for kubelet's first complete list
	// before Run gives up on the API, e.g. on a stale socket.
	podsStartTimeout = 5 * time.Second
	// A lost watch is reopened after a delay that starts here and doubles.
	firstRewatchDelay = 100 * time.Millisecond
	maxRewatchDelay   = 5 * time.Second
	// maxPodsMessageSize is what kubelet's own clients accept: a full pod
	// can outgrow gRPC's default of 4 MiB.
	maxPodsMessageSize = 16 << 20
)

// KubeletPods is a PodSource fed by kubelet's Pods API: the pods kubelet
// itself runs, without a request to the API server. On a miss it asks
// kubelet for the pod by UID, since its watch stream may lag its pod
// manager by a moment.
type KubeletPods struct {
	socket string
	logger *slog.Logger
	cache  *podCache

	api      atomic.Pointer[podsapi.PodsClient]
	synced   chan struct{} // closed on the first complete list
	syncOnce sync.Once
}

// NewKubeletPods returns a source for kubelet's Pods API at socket; Run
// feeds it.
func NewKubeletPods(socket string, logger *slog.Logger) *KubeletPods {
	return &KubeletPods{socket: socket, logger: logger, cache: newPodCache(), synced: make(chan struct{})}
}

// Notify has onSet told of every pod the source adds or changes, and
// onEnd of every pod that ends or goes, from the goroutine running it:
// neither may block. Call it before Run.
func (k *KubeletPods) Notify(onSet, onEnd func(Pod)) { k.cache.onSet, k.cache.onEnd = onSet, onEnd }

// HasSynced says whether kubelet's complete list of pods has arrived.
func (k *KubeletPods) HasSynced() bool {
	select {
	case <-k.synced:
		return true
	default:
		return false
	}
}

// Run follows kubelet's pods until ctx ends, then returns nil. It returns
// an error wrapping ErrPodsAPIUnavailable at once when kubelet does not
// serve the API, so that the caller can fall back to an informer. Once
// kubelet has answered, a lost watch (e.g. a kubelet restart) is reopened.
func (k *KubeletPods) Run(ctx context.Context) error {
	if _, err := os.Stat(k.socket); err != nil {
		return fmt.Errorf("%w: %w", ErrPodsAPIUnavailable, err)
	}
	conn, err := dialPods(k.socket)
	if err != nil {
		return err
	}
	defer conn.Close()
	api := podsapi.NewPodsClient(conn)
	k.api.Store(&api)
	defer k.api.Store(nil)
	for delay := firstRewatchDelay; ; delay = min(2*delay, maxRewatchDelay) {
		synced, err := k.watch(ctx, api)
		switch {
		case ctx.Err() != nil:
			return nil
		case !k.HasSynced():
			return fmt.Errorf("%w at %s: %w", ErrPodsAPIUnavailable, k.socket, err)
		case synced:
			delay = firstRewatchDelay
		}
		k.logger.Warn("kubelet Pods API watch ended, reopening", "socket", k.socket, "err", err, "delay", delay)
		select {
		case <-time.After(delay/2 + rand.N(delay)):
		case <-ctx.Done():
			return nil
		}
	}
}

func dialPods(socket string) (*grpc.ClientConn, error) {
	abs, err := filepath.Abs(socket)
	if err != nil {
		return nil, fmt.Errorf("kubelet Pods API socket %q: %w", socket, err)
	}
	// Redial a restarting kubelet within a tenth of a second, not gRPC's
	// default of one.
	redial := backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second}
	conn, err := grpc.NewClient("unix://"+abs,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPodsMessageSize)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: redial, MinConnectTimeout: time.Second}),
	)
	if err != nil {
		return nil, fmt.Errorf("kubelet Pods API at %s: %w", socket, err)
	}
	return conn, nil
}

// watch follows one WatchPods stream until it breaks, and says whether it
// got as far as a complete list. Before kubelet has ever answered, the
// stream must complete its list within podsStartTimeout.
func (k *KubeletPods) watch(ctx context.Context, api podsapi.PodsClient) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !k.HasSynced() {
		timer := time.AfterFunc(podsStartTimeout, func() {
			if !k.HasSynced() {
				cancel()
			}
		})
		defer timer.Stop()
	}
	stream, err := api.WatchPods(ctx, &podsapi.WatchPodsRequest{}, grpc.WaitForReady(true))
	if err != nil {
		return false, err
	}
	// listed are the UIDs of the stream's initial list: pods the cache
	// holds from an earlier stream but kubelet no longer lists are gone.
	listed := map[string]bool{}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return listed == nil, fmt.Errorf("watch kubelet pods: %w", err)
		}
		listed = k.apply(ev, listed)
	}
}

// apply applies one watch event to the cache and returns listed as it is
// after the event: nil once the initial list is complete.
func (k *KubeletPods) apply(ev *podsapi.WatchPodsEvent, listed map[string]bool) map[string]bool {
	if ev.GetType() == podsapi.EventType_INITIAL_SYNC_COMPLETE {
		if listed != nil {
			k.cache.retain(listed)
		}
		k.syncOnce.Do(func() { close(k.synced) })
		return nil
	}
	pod, err := decodePod(ev.GetPod())
	if err != nil {
		k.logger.Error("kubelet Pods API sent an undecodable pod", "event", ev.GetType().String(), "err", err)
		return listed
	}
	switch ev.GetType() {
	case podsapi.EventType_ADDED, podsapi.EventType_MODIFIED:
		k.cache.set(pod)
		if listed != nil {
			listed[pod.UID] = true
		}
	case podsapi.EventType_DELETED:
		k.cache.remove(pod.UID)
		delete(listed, pod.UID)
	}
	return listed
}

// decodePod decodes a pod kubelet encoded with v1.Pod#Marshal.
func decodePod(b []byte) (Pod, error) {
	var p corev1.Pod
	if err := p.Unmarshal(b); err != nil {
		return Pod{}, err
	}
	if p.UID == "" {
		return Pod{}, fmt.Errorf("pod %s/%s has no uid", p.Namespace, p.Name)
	}
	return podFrom(&p), nil
}

// Pod implements PodSource.
func (k *KubeletPods) Pod(ctx context.Context, ref PodRef) (Pod, error) {
	return k.cache.wait(ctx, ref, k.getPod)
}

// UIDOf is the UID of the one pod of that name, "" for none or two.
func (k *KubeletPods) UIDOf(namespace, name string) string { return k.cache.uidOf(namespace, name) }

// Running reports whether a pod of that name, and UID when not "", is
// cached and has not ended.
func (k *KubeletPods) Running(namespace, name, uid string) bool {
	return k.cache.running(namespace, name, uid)
}

// getPod asks kubelet for the pod by UID, for a pod its watch stream has
// not reported yet.
func (k *KubeletPods) getPod(ctx context.Context, ref PodRef) (Pod, bool) {
	api := k.api.Load()
	if api == nil || ref.UID == "" {
		return Pod{}, false
	}
	resp, err := (*api).GetPod(ctx, &podsapi.GetPodRequest{PodUID: ref.UID})
	if err != nil {
		if status.Code(err) != codes.NotFound {
			k.logger.Debug("kubelet Pods API GetPod failed", "pod", ref.String(), "err", err)
		}
		return Pod{}, false
	}
	pod, err := decodePod(resp.GetPod())
	if err != nil || pod.Namespace != ref.Namespace || pod.Name != ref.Name {
		return Pod{}, false
	}
	return pod, true
}
