package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	nadinformers "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/informers/externalversions/k8s.cni.cncf.io/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// ResourceNameAnnotation names the device plugin resource whose devices a
// NetworkAttachmentDefinition's networks use.
const ResourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"

// ErrNADNotFound says no NetworkAttachmentDefinition of that namespace and
// name exists, even after a moment's wait for one just created.
var ErrNADNotFound = errors.New("NetworkAttachmentDefinition not found")

const (
	// nadMissWait is how long a lookup waits for a NetworkAttachmentDefinition
	// it does not find: one created together with the pod may reach the
	// cache after the pod's sandbox.
	nadMissWait = time.Second
	// syncPoll is how often a lookup checks whether the first list has
	// arrived; informers offer no signal for it.
	syncPoll = 10 * time.Millisecond
)

// NAD is what the CNI side needs of a NetworkAttachmentDefinition (NPWG
// multi-network spec section 3.2).
type NAD struct {
	Namespace string
	Name      string
	// ResourceName is the value of the k8s.v1.cni.cncf.io/resourceName
	// annotation, empty without one.
	ResourceName string
	// Config is spec.config, a CNI config or configlist; empty for an
	// implementation-specific network reference (3.2.4).
	Config string
}

// NADSource looks NetworkAttachmentDefinitions up.
type NADSource interface {
	// NAD returns the named NetworkAttachmentDefinition. On a miss it
	// waits a moment (and no longer than ctx allows) for one just created,
	// then fails with an error wrapping ErrNADNotFound.
	NAD(ctx context.Context, namespace, name string) (NAD, error)
}

// NADInformer is a NADSource answering from an informer on every
// namespace's NetworkAttachmentDefinitions.
type NADInformer struct {
	logger   *slog.Logger
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandlerRegistration
	err      error // from setting the informer up
	changes  *changes
}

// NewNADInformer returns an informer on NetworkAttachmentDefinitions; Run
// feeds it.
func NewNADInformer(client nadclient.Interface, logger *slog.Logger) *NADInformer {
	n := &NADInformer{
		logger:   logger,
		informer: nadinformers.NewFilteredNetworkAttachmentDefinitionInformer(client, metav1.NamespaceAll, 0, cache.Indexers{}, kubeclient.QuietKind),
		changes:  newChanges(),
	}
	transformErr := n.informer.SetTransform(stripNAD)
	notify := func(any) { n.changes.notify() }
	handler, handlerErr := n.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, obj any) { notify(obj) },
		DeleteFunc: notify,
	})
	n.handler, n.err = handler, errors.Join(transformErr, handlerErr)
	return n
}

// Run follows NetworkAttachmentDefinitions until ctx ends, then returns
// nil.
func (n *NADInformer) Run(ctx context.Context) error {
	if n.err != nil {
		return fmt.Errorf("NetworkAttachmentDefinition informer: %w", n.err)
	}
	n.informer.RunWithContext(ctx)
	return nil
}

// HasSynced says whether the NetworkAttachmentDefinitions have been listed.
func (n *NADInformer) HasSynced() bool { return n.err == nil && n.handler.HasSynced() }

// NAD implements NADSource. Before the first list has arrived it waits for
// it, as long as ctx allows.
func (n *NADInformer) NAD(ctx context.Context, namespace, name string) (NAD, error) {
	if err := n.waitSynced(ctx); err != nil {
		return NAD{}, fmt.Errorf("NetworkAttachmentDefinition %s/%s: not listed yet: %w", namespace, name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, nadMissWait)
	defer cancel()
	for {
		changed := n.changes.next()
		if nad, ok := n.lookup(namespace, name); ok {
			return nad, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return NAD{}, fmt.Errorf("NetworkAttachmentDefinition %s/%s: %w", namespace, name, ErrNADNotFound)
		}
	}
}

func (n *NADInformer) waitSynced(ctx context.Context) error {
	for !n.HasSynced() {
		select {
		case <-time.After(syncPoll):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

func (n *NADInformer) lookup(namespace, name string) (NAD, bool) {
	obj, ok, err := n.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return NAD{}, false
	}
	nad, ok := obj.(*nadv1.NetworkAttachmentDefinition)
	if !ok {
		return NAD{}, false
	}
	return NAD{
		Namespace:    nad.Namespace,
		Name:         nad.Name,
		ResourceName: nad.Annotations[ResourceNameAnnotation],
		Config:       nad.Spec.Config,
	}, true
}

// stripNAD drops what the cache does not need, such as managed fields.
func stripNAD(obj any) (any, error) {
	nad, ok := obj.(*nadv1.NetworkAttachmentDefinition)
	if !ok {
		return obj, nil
	}
	return &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       nad.Namespace,
			Name:            nad.Name,
			UID:             nad.UID,
			ResourceVersion: nad.ResourceVersion,
			Annotations:     nad.Annotations,
		},
		Spec: nad.Spec,
	}, nil
}
