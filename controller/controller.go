package controller

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"

	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	nadinformers "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/informers/externalversions/k8s.cni.cncf.io/v1"
	nadlisters "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/listers/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/netconf"
)

// Options configure a Controller.
type Options struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	NADs    nadclient.Interface
	// CreateDefault creates the "default" PodNetwork and recreates it when
	// deleted; false is the KEP's disable-default-podnetwork-creation.
	CreateDefault bool
	// AllowedNamespaces is the agents' --cni-allowed-namespaces: the
	// namespaces whose NetworkAttachmentDefinitions a PodNetworkAttachment
	// may name besides its own (nil: "default").
	AllowedNamespaces netconf.AllowedNamespaces
	// Workers reconcile in parallel; 0 means 2.
	Workers int
	Logger  *slog.Logger
}

// key is one object to reconcile.
type key struct {
	kind      kind
	namespace string
	name      string
}

type kind int

const (
	kindPodNetwork kind = iota
	kindAttachment
	kindPod
)

// Controller reconciles PodNetworks, PodNetworkAttachments and gated pods.
type Controller struct {
	opts        Options
	pods        cache.SharedIndexInformer
	podNetworks cache.SharedIndexInformer
	attachments cache.SharedIndexInformer
	nadInformer cache.SharedIndexInformer
	nads        nadlisters.NetworkAttachmentDefinitionLister
	queue       workqueue.TypedRateLimitingInterface[key]
	recorder    record.EventRecorder
	broadcaster record.EventBroadcaster

	synced chan struct{}

	// lastEvent is the last waiting message each gated pod (by
	// namespace/name) got, so a pod
	// hears of each new reason once rather than at every resync.
	mu        sync.Mutex
	lastEvent map[string]string
}

// New returns a Controller; Run starts it.
func New(o Options) (*Controller, error) {
	o.Logger = cmp.Or(o.Logger, slog.New(slog.DiscardHandler))
	o.Workers = cmp.Or(o.Workers, 2)
	c := &Controller{
		opts: o,
		pods: coreinformers.NewPodInformer(o.Kube, metav1.NamespaceAll, 0, cache.Indexers{byReference: indexPodReferences}),
		podNetworks: dynamicinformer.NewFilteredDynamicInformer(o.Dynamic, mnv1.PodNetworkResource, metav1.NamespaceAll, 0,
			cache.Indexers{}, nil).Informer(),
		attachments: dynamicinformer.NewFilteredDynamicInformer(o.Dynamic, mnv1.PodNetworkAttachmentResource, metav1.NamespaceAll, 0,
			cache.Indexers{byPodNetwork: indexAttachmentNetwork, cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}, nil).Informer(),
		nadInformer: nadinformers.NewNetworkAttachmentDefinitionInformer(o.NADs, metav1.NamespaceAll, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		queue:       workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[key]()),
		lastEvent:   map[string]string{},
		synced:      make(chan struct{}),
	}
	c.nads = nadlisters.NewNetworkAttachmentDefinitionLister(c.nadInformer.GetIndexer())
	if err := c.pods.SetTransform(stripPod); err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	c.broadcaster = record.NewBroadcaster()
	c.recorder = c.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "hwnet-controller"})
	if err := c.addHandlers(); err != nil {
		return nil, err
	}
	return c, nil
}

// Run runs the informers and workers until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	c.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.opts.Kube.CoreV1().Events("")})
	defer c.broadcaster.Shutdown()
	defer c.queue.ShutDown()
	for _, inf := range []cache.SharedIndexInformer{c.pods, c.podNetworks, c.attachments, c.nadInformer} {
		go inf.RunWithContext(ctx)
	}
	if !cache.WaitForCacheSync(ctx.Done(), c.pods.HasSynced, c.podNetworks.HasSynced, c.attachments.HasSynced, c.nadInformer.HasSynced) {
		return fmt.Errorf("multi-network controller: caches not synced: %w", ctx.Err())
	}
	c.opts.Logger.Info("multi-network controller running", "createDefault", c.opts.CreateDefault)
	close(c.synced)
	if c.opts.CreateDefault {
		c.queue.Add(key{kind: kindPodNetwork, name: mnv1.DefaultPodNetwork})
	}
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

// Synced is closed once the caches hold the cluster's objects and every
// one of them is queued. Tests wait on it; the probes do not, since a
// replica waiting for the lease is as ready as the leader.
func (c *Controller) Synced() <-chan struct{} { return c.synced }

func (c *Controller) processNext(ctx context.Context) bool {
	k, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(k)
	if err := c.reconcile(ctx, k); err != nil {
		c.opts.Logger.Error("reconcile", "kind", k.kind.String(), "namespace", k.namespace, "name", k.name, "err", err)
		c.queue.AddRateLimited(k)
		return true
	}
	c.queue.Forget(k)
	return true
}

func (c *Controller) reconcile(ctx context.Context, k key) error {
	switch k.kind {
	case kindPodNetwork:
		return c.syncPodNetwork(ctx, k.name)
	case kindAttachment:
		return c.syncAttachment(ctx, k.namespace, k.name)
	default:
		return c.syncGatedPod(ctx, k.namespace, k.name)
	}
}

func (k kind) String() string {
	return [...]string{"PodNetwork", "PodNetworkAttachment", "Pod"}[k]
}
