package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// ErrPodNetworkNotFound says the PodNetwork or PodNetworkAttachment does
// not exist.
var ErrPodNetworkNotFound = errors.New("not found")

// PodNetworkSource looks KEP-3698 objects up.
type PodNetworkSource interface {
	PodNetwork(ctx context.Context, name string) (*mnv1.PodNetwork, error)
	PodNetworkAttachment(ctx context.Context, namespace, name string) (*mnv1.PodNetworkAttachment, error)
}

// PodNetworkInformer is a PodNetworkSource answering from informers it
// starts at the first lookup, once the API server serves the CRDs: a
// cluster that never uses PodNetworks neither watches them nor logs about
// their absence.
type PodNetworkInformer struct {
	run       context.Context
	dynamic   dynamic.Interface
	discovery discovery.DiscoveryInterface
	logger    *slog.Logger

	mu          sync.Mutex
	podNetworks cache.SharedIndexInformer
	attachments cache.SharedIndexInformer
}

// NewPodNetworkInformer returns a PodNetworkSource whose informers, once
// started, run until run ends.
func NewPodNetworkInformer(run context.Context, dyn dynamic.Interface, disc discovery.DiscoveryInterface, logger *slog.Logger) *PodNetworkInformer {
	return &PodNetworkInformer{run: run, dynamic: dyn, discovery: disc, logger: logger}
}

// PodNetwork returns the named PodNetwork.
func (p *PodNetworkInformer) PodNetwork(ctx context.Context, name string) (*mnv1.PodNetwork, error) {
	obj, err := p.get(ctx, func() cache.SharedIndexInformer { return p.podNetworks }, name)
	if err != nil {
		return nil, fmt.Errorf("PodNetwork %s: %w", name, err)
	}
	return mnv1.FromUnstructured[mnv1.PodNetwork](obj)
}

// PodNetworkAttachment returns the named PodNetworkAttachment.
func (p *PodNetworkInformer) PodNetworkAttachment(ctx context.Context, namespace, name string) (*mnv1.PodNetworkAttachment, error) {
	obj, err := p.get(ctx, func() cache.SharedIndexInformer { return p.attachments }, namespace+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("PodNetworkAttachment %s/%s: %w", namespace, name, err)
	}
	return mnv1.FromUnstructured[mnv1.PodNetworkAttachment](obj)
}

func (p *PodNetworkInformer) get(ctx context.Context, informer func() cache.SharedIndexInformer, key string) (any, error) {
	if err := p.start(ctx); err != nil {
		return nil, err
	}
	obj, exists, err := informer().GetIndexer().GetByKey(key)
	switch {
	case err != nil:
		return nil, err
	case !exists:
		return nil, ErrPodNetworkNotFound
	}
	return obj, nil
}

// Warm starts the informers now if the API server serves the CRDs, so the
// first pod's ADD finds them synced; without the CRDs it does nothing, and
// the first lookup checks again.
func (p *PodNetworkInformer) Warm(ctx context.Context) {
	if err := p.start(ctx); err != nil {
		p.logger.Debug("PodNetwork caches not started", "err", err)
	}
}

// start starts the informers if the API server serves the CRDs, and waits
// until they hold the objects, within ctx.
func (p *PodNetworkInformer) start(ctx context.Context) error {
	p.mu.Lock()
	if p.podNetworks == nil {
		if err := p.served(); err != nil {
			p.mu.Unlock()
			return err
		}
		p.podNetworks = p.informer(mnv1.PodNetworkResource)
		p.attachments = p.informer(mnv1.PodNetworkAttachmentResource)
		p.logger.Info("watching PodNetworks and PodNetworkAttachments")
	}
	pn, pna := p.podNetworks, p.attachments
	p.mu.Unlock()
	if !cache.WaitForCacheSync(ctx.Done(), pn.HasSynced, pna.HasSynced) {
		return fmt.Errorf("PodNetwork caches not synced: %w", ctx.Err())
	}
	return nil
}

// served checks with the API server's discovery that the CRDs are
// installed: an informer on a resource that is not served only retries.
func (p *PodNetworkInformer) served() error {
	gv := mnv1.Group + "/" + mnv1.Version
	_, err := p.discovery.ServerResourcesForGroupVersion(gv)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the API server does not serve %s: install the PodNetwork CRDs of deploy/crds", gv)
	}
	if err != nil {
		return fmt.Errorf("discover %s: %w", gv, err)
	}
	return nil
}

func (p *PodNetworkInformer) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	inf := dynamicinformer.NewFilteredDynamicInformer(p.dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, kubeclient.QuietKind).Informer()
	go inf.RunWithContext(p.run)
	return inf
}
