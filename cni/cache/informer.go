package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// InformerPods is a PodSource fed by an informer on the pods bound to one
// node, for kubelets that do not serve the Pods API. It reads from the API
// server in the background (one list, then a watch), never on a lookup.
type InformerPods struct {
	nodeName string
	logger   *slog.Logger
	cache    *podCache
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandlerRegistration
	err      error // from setting the informer up
}

// NewInformerPods returns a source of the pods whose spec.nodeName is
// nodeName; Run feeds it.
func NewInformerPods(client kubernetes.Interface, nodeName string, logger *slog.Logger) *InformerPods {
	p := &InformerPods{
		nodeName: nodeName,
		logger:   logger,
		cache:    newPodCache(),
		informer: coreinformers.NewFilteredPodInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}, onNode(nodeName)),
	}
	// A busy node runs hundreds of pods whose specs and statuses nobody
	// here reads.
	transformErr := p.informer.SetTransform(stripPod)
	handler, handlerErr := p.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    p.onAdd,
		UpdateFunc: p.onUpdate,
		DeleteFunc: p.onDelete,
	})
	p.handler, p.err = handler, errors.Join(transformErr, handlerErr)
	return p
}

// onNode tweaks the informer's requests to the pods bound to nodeName.
// Their watch is a quiet kind's (kubeclient.QuietKind): an idle node's
// pods change as seldom as its NetworkAttachmentDefinitions, and a
// bookmark a minute woke the idle agent for nothing. Without them the
// watch's resource version ages: on a busy cluster the watch started
// again 30-60 min later may find it gone from the API server's watch
// cache and list the node's pods again, once an hour against 30-60 wakes.
func onNode(nodeName string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
		kubeclient.QuietKind(o)
	}
}

// Run follows the node's pods until ctx ends, then returns nil.
func (p *InformerPods) Run(ctx context.Context) error {
	if p.nodeName == "" {
		return errors.New("pod informer: node name is empty")
	}
	if p.err != nil {
		return fmt.Errorf("pod informer: %w", p.err)
	}
	p.informer.RunWithContext(ctx)
	return nil
}

// Notify has onSet told of every pod the source adds or changes, and
// onEnd of every pod that ends or goes, from the informer's goroutine:
// neither may block. Call it before Run.
func (p *InformerPods) Notify(onSet, onEnd func(Pod)) { p.cache.onSet, p.cache.onEnd = onSet, onEnd }

// HasSynced says whether the node's pods have been listed.
func (p *InformerPods) HasSynced() bool { return p.err == nil && p.handler.HasSynced() }

// Pod implements PodSource.
func (p *InformerPods) Pod(ctx context.Context, ref PodRef) (Pod, error) {
	return p.cache.wait(ctx, ref, nil)
}

// UIDOf is the UID of the one pod of that name, "" for none or two.
func (p *InformerPods) UIDOf(namespace, name string) string { return p.cache.uidOf(namespace, name) }

// Running reports whether a pod of that name, and UID when not "", is
// cached and has not ended.
func (p *InformerPods) Running(namespace, name, uid string) bool {
	return p.cache.running(namespace, name, uid)
}

func (p *InformerPods) onAdd(obj any) {
	if pod, ok := obj.(*corev1.Pod); ok {
		p.cache.set(podFrom(pod))
	}
}

func (p *InformerPods) onUpdate(oldObj, newObj any) {
	// A pod deleted and created again under its name while the watch was
	// down comes as one update.
	if old, ok := oldObj.(*corev1.Pod); ok {
		if pod, ok := newObj.(*corev1.Pod); ok && pod.UID != old.UID {
			p.cache.remove(string(old.UID))
		}
	}
	p.onAdd(newObj)
}

func (p *InformerPods) onDelete(obj any) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		p.cache.remove(string(pod.UID))
	}
}

// stripPod keeps a pod's identity, annotations, claims and phase.
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Namespace:       pod.Namespace,
		Name:            pod.Name,
		UID:             pod.UID,
		ResourceVersion: pod.ResourceVersion,
		Annotations:     pod.Annotations,
	},
		Spec:   corev1.PodSpec{ResourceClaims: pod.Spec.ResourceClaims},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, ResourceClaimStatuses: pod.Status.ResourceClaimStatuses},
	}, nil
}
