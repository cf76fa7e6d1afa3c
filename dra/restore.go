package dra

import (
	"context"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"
)

// restoreDelay is how long after a slice deletion the slices are published
// again: time for the library's own informer to see the deletion, so that
// its sync recreates the slice rather than find nothing missing.
const restoreDelay = 500 * time.Millisecond

// restorer publishes the slices again when someone else deletes them:
// kubelet deletes every slice of its node when it starts (and again when
// a driver stays unregistered), and the library alone would recreate
// them only at its next resync, 30 s later.
type restorer struct {
	republish func(context.Context)
	pending   atomic.Bool
}

// watch runs until ctx ends, calling republish restoreDelay after a
// deletion of one of the node's slices of the driver; deletions meanwhile
// are covered by that one call. It caches the slices' metadata only: the
// library's own informer holds their devices already, 10 MB at 2048 VFs.
// The returned function waits until the watch stopped, once ctx ended.
func (r *restorer) watch(ctx context.Context, client metadata.Interface, node, driver string) (func(), error) {
	selector := fields.Set{"spec.nodeName": node, "spec.driver": driver}.String()
	factory := metadatainformer.NewFilteredSharedInformerFactory(client, 0, metav1.NamespaceAll,
		func(o *metav1.ListOptions) { o.FieldSelector = selector })
	informer := factory.ForResource(resourceapi.SchemeGroupVersion.WithResource("resourceslices")).Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(any) { r.deleted(ctx) }}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	return factory.Shutdown, nil
}

func (r *restorer) deleted(ctx context.Context) {
	if !r.pending.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(restoreDelay, func() {
		r.pending.Store(false)
		if ctx.Err() == nil {
			r.republish(ctx)
		}
	})
}
