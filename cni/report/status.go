// Package report writes back to the API server what hwnet did for a pod:
// the network-status annotations (NPWG multi-network spec section 5) in one
// PATCH, the pod's Events, and the status of the devices of a DRA
// ResourceClaim (KEP-4817). Package cache holds what the ADD read.
package report

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/hwnet-io/hwnet/cni/cache"
)

// ErrPodGone says the pod of that UID no longer exists: it was deleted, or
// replaced by a pod of the same name.
var ErrPodGone = errors.New("pod deleted or replaced")

const (
	// A failed PATCH is tried again after a delay that starts here and
	// doubles.
	firstPatchRetryDelay = 50 * time.Millisecond
	maxPatchRetryDelay   = 2 * time.Second
	// patchAttemptTimeout bounds one PATCH, so that a connection the API
	// server dropped without a word does not hold the whole CNI ADD.
	patchAttemptTimeout = 10 * time.Second
	// eventFlushTimeout bounds how long Shutdown waits for queued Events.
	eventFlushTimeout = 5 * time.Second
)

// StatusWriter writes what the CNI side tells the API server: the
// network-status annotation and Events about pods. It is safe for
// concurrent use.
type StatusWriter struct {
	client    kubernetes.Interface
	component string
	logger    *slog.Logger

	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	sink        *flushSink
	shutdown    sync.Once
	closed      atomic.Bool
}

// NewStatusWriter returns a writer whose PATCHes and Events name component
// as their field manager and source.
func NewStatusWriter(client kubernetes.Interface, component string, logger *slog.Logger) *StatusWriter {
	sink := &flushSink{
		EventSink: &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events(metav1.NamespaceAll)},
		marker:    types.UID("flush-" + rand.Text()),
		drained:   make(chan struct{}),
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(sink)
	return &StatusWriter{
		client:      client,
		component:   component,
		logger:      logger,
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}),
		sink:        sink,
	}
}

// statusPatch is a JSON merge patch of the network-status annotation. Its
// uid makes the API server refuse it for another pod of the same name.
type statusPatch struct {
	Metadata statusPatchMeta `json:"metadata"`
}

type statusPatchMeta struct {
	UID         string            `json:"uid"`
	Annotations map[string]string `json:"annotations"`
}

// SetNetworkStatus sets the pod's status annotations (network-status, and
// the KEP-3698 networks-status of a pod that references PodNetworks) with
// one merge PATCH, leaving its other annotations be. The PATCH carries the
// pod's UID, so it never lands on a pod that replaced this one; the error
// then wraps ErrPodGone, as it does when the pod was deleted. A PATCH the
// API server could not take (a conflict, 429, 5xx, a timeout, no answer) is
// tried again, waiting longer each time, until ctx ends.
func (w *StatusWriter) SetNetworkStatus(ctx context.Context, pod cache.PodRef, annotations map[string]string) error {
	if pod.UID == "" {
		return fmt.Errorf("set network-status of pod %s: empty pod UID", pod)
	}
	patch, err := json.Marshal(statusPatch{Metadata: statusPatchMeta{
		UID:         pod.UID,
		Annotations: annotations,
	}})
	if err != nil {
		return fmt.Errorf("set network-status of pod %s: %w", pod, err)
	}
	delay := firstPatchRetryDelay
	for attempt := 1; ; attempt++ {
		err := w.patch(ctx, pod, patch)
		switch {
		case err == nil:
			return nil
		case apierrors.IsNotFound(err) || isUIDMismatch(err):
			return fmt.Errorf("set network-status of pod %s: %w: %w", pod, ErrPodGone, err)
		case !retriable(err):
			return fmt.Errorf("set network-status of pod %s: %w", pod, err)
		}
		select {
		case <-time.After(delay/2 + mathrand.N(delay)):
		case <-ctx.Done():
			return fmt.Errorf("set network-status of pod %s: %w after %d attempts, the last: %w", pod, ctx.Err(), attempt, err)
		}
		delay = min(2*delay, maxPatchRetryDelay)
	}
}

func (w *StatusWriter) patch(ctx context.Context, pod cache.PodRef, patch []byte) error {
	ctx, cancel := context.WithTimeout(ctx, patchAttemptTimeout)
	defer cancel()
	_, err := w.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch,
		metav1.PatchOptions{FieldManager: w.component})
	return err
}

// isUIDMismatch recognises the API server's refusal of a patch whose uid
// is not the pod's: the uid is immutable.
func isUIDMismatch(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, cause := range status.Status().Details.Causes {
		if cause.Field == "metadata.uid" {
			return true
		}
	}
	return false
}

// retriable says whether the same PATCH may succeed later.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // no answer: a broken connection or a timeout
	}
	return apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || status.Status().Code >= 500
}

// Event records an Event about the pod (eventType corev1.EventTypeNormal
// or corev1.EventTypeWarning). It never blocks: client-go's broadcaster
// queues it, merges repeats, and writes it in the background.
func (w *StatusWriter) Event(pod cache.PodRef, eventType, reason, message string) {
	if w.closed.Load() {
		return
	}
	w.recorder.Event(podReference(pod), eventType, reason, message)
}

// Shutdown writes the Events queued so far, waiting at most
// eventFlushTimeout, and stops the broadcaster. Later Events are dropped.
func (w *StatusWriter) Shutdown() {
	w.shutdown.Do(func() {
		w.closed.Store(true)
		w.recorder.Event(&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", UID: w.sink.marker},
			corev1.EventTypeNormal, "Flush", "")
		select {
		case <-w.sink.drained:
		case <-time.After(eventFlushTimeout):
			w.logger.Warn("events still queued at shutdown are lost", "component", w.component)
		}
		w.broadcaster.Shutdown()
	})
}

func podReference(pod cache.PodRef) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: types.UID(pod.UID)}
}

// flushSink writes Events to the API server, except the marker Shutdown
// queues behind all others: the broadcaster writes in order, one at a
// time, so the marker's arrival says every earlier Event is written (or
// given up on). client-go offers no other way to wait for its queue.
type flushSink struct {
	record.EventSink
	marker  types.UID
	drained chan struct{}
}

func (s *flushSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if e.InvolvedObject.UID == s.marker {
		close(s.drained)
		return e, nil
	}
	return s.EventSink.Create(e)
}
