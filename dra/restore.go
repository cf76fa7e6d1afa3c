package dra

import (
	"context"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/hwnet-io/hwnet/internal/kubeclient"
)

// restoreDelay is how long after someone else's write to the slices the
// publisher looks at them: kubelet deletes every slice of its node in one
// deletecollection, which the watch sees as one deletion per slice, and
// one sync after the last of them restores them all at once.
const restoreDelay = 500 * time.Millisecond

// restorer watches the node's slices of the driver, their metadata only,
// and tells the publisher each one's resourceVersion or deletion, so that
// it writes again what someone else deleted or changed: kubelet deletes
// every slice of its node when it starts (and again when a driver stays
// unregistered), and the library alone would have restored them only at
// its next sync, 30 s later.
type restorer struct {
	observe func(name string, ob observation)
	wake    func()
	pending atomic.Bool
}

// watch runs until ctx ends, telling observe every event and wake
// restoreDelay after one (events meanwhile are covered by that wake). It
// caches the slices' metadata only, without their managed fields: the
// devices are what the publisher never keeps. It returns the metadata of
// a slice as last seen, and a function that waits until the watch
// stopped, once ctx ended.
func (r *restorer) watch(ctx context.Context, client metadata.Interface, node, driver string) (func(string) *metav1.ObjectMeta, func(), error) {
	selector := sliceSelector(node, driver).String()
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = selector; kubeclient.LongWatch(o) })
	informer := factory.ForResource(resourceapi.SchemeGroupVersion.WithResource("resourceslices")).Informer()
	if err := informer.SetTransform(dropManagedFields); err != nil {
		return nil, nil, err
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.saw(ctx, obj, false) },
		UpdateFunc: func(_, obj any) { r.saw(ctx, obj, false) },
		DeleteFunc: func(obj any) { r.saw(ctx, obj, true) },
	}
	if _, err := informer.AddEventHandler(handler); err != nil {
		return nil, nil, err
	}
	factory.Start(ctx.Done())
	return func(name string) *metav1.ObjectMeta { return cachedMeta(informer.GetStore(), name) }, factory.Shutdown, nil
}

// saw tells the publisher of one event and wakes it a moment later.
func (r *restorer) saw(ctx context.Context, obj any, gone bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, gone = tombstone.Obj, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	r.observe(m.GetName(), observation{rv: m.GetResourceVersion(), gone: gone})
	if !r.pending.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(restoreDelay, func() {
		r.pending.Store(false)
		if ctx.Err() == nil {
			r.wake()
		}
	})
}

// dropManagedFields keeps the cache to what the publisher reads.
func dropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// cachedMeta is a slice's metadata in store, nil if it has none.
func cachedMeta(store cache.Store, name string) *metav1.ObjectMeta {
	obj, ok, err := store.GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return &m.ObjectMeta
	}
	return nil
}
