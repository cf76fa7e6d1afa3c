// Package cache keeps on the node the API objects a CNI ADD reads, so that
// the ADD makes no read of the API server: the node's pods (from kubelet's
// Pods API, or a node-scoped informer where kubelet does not serve it),
// NetworkAttachmentDefinitions (NPWG multi-network spec section 3) and the
// KEP-3698 PodNetworks and PodNetworkAttachments. Package report writes
// back what the ADD did.
package cache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// ErrPodNotFound says the cache did not come to hold the pod before the
// context ended.
var ErrPodNotFound = errors.New("pod not found in the node's pod cache")

// Pod is what the CNI side needs of a pod.
type Pod struct {
	Namespace   string
	Name        string
	UID         string
	Annotations map[string]string
	// Claims are the names of the pod's ResourceClaims in its namespace:
	// those its spec names (resourceClaimName) and those made for it from
	// a template (status.resourceClaimStatuses).
	Claims []string
	// Ended is true once the pod's phase is Succeeded or Failed.
	Ended bool
}

// PodRef names a pod as the runtime does in CNI_ARGS (K8S_POD_NAMESPACE,
// K8S_POD_NAME, K8S_POD_UID).
type PodRef struct {
	Namespace string
	Name      string
	UID       string
}

func (r PodRef) String() string {
	if r.UID == "" {
		return r.Namespace + "/" + r.Name
	}
	return fmt.Sprintf("%s/%s (uid %s)", r.Namespace, r.Name, r.UID)
}

// PodSource answers from a local cache and never asks the API server.
type PodSource interface {
	// Pod waits, as long as ctx allows, until the cache holds the pod of
	// ref's UID: a pod is often created a moment before its sandbox, and a
	// same-named older pod must not be mistaken for it. An empty UID
	// accepts any pod of that namespace and name. The error wraps
	// ErrPodNotFound and ctx's error.
	Pod(ctx context.Context, ref PodRef) (Pod, error)
	// UIDOf is the UID of the cached pod with that namespace and name, ""
	// when the cache holds none or two (an old pod terminating beside its
	// namesake): kubelet's PodResources names pods without their UID.
	UIDOf(namespace, name string) string
	// Running reports whether the cache holds a pod of that namespace
	// and name, and UID when not "", that has not ended (phase Succeeded
	// or Failed): kubelet still holds its devices, whatever a kubelet
	// that is starting says.
	Running(namespace, name, uid string) bool
}

// podCache holds the pods of the node by UID: two pods of one name can
// exist at once while the older one terminates.
type podCache struct {
	changes *changes
	// onSet, when set before the source runs, is told of every pod added
	// or changed; onEnd of every pod that ends or goes.
	onSet func(Pod)
	onEnd func(Pod)

	mu   sync.Mutex
	pods map[string]Pod
}

func newPodCache() *podCache {
	return &podCache{pods: map[string]Pod{}, changes: newChanges()}
}

func (c *podCache) set(p Pod) {
	c.mu.Lock()
	old, known := c.pods[p.UID]
	c.pods[p.UID] = p
	c.mu.Unlock()
	c.changes.notify()
	if c.onSet != nil {
		c.onSet(p.clone())
	}
	if p.Ended && !(known && old.Ended) {
		c.ended(p)
	}
}

func (c *podCache) remove(uid string) {
	c.mu.Lock()
	p, known := c.pods[uid]
	delete(c.pods, uid)
	c.mu.Unlock()
	c.changes.notify()
	if known {
		c.ended(p)
	}
}

// retain forgets every pod whose UID is not in keep: those deleted while
// the cache was not listening.
func (c *podCache) retain(keep map[string]bool) {
	var gone []Pod
	c.mu.Lock()
	maps.DeleteFunc(c.pods, func(uid string, p Pod) bool {
		if keep[uid] {
			return false
		}
		gone = append(gone, p)
		return true
	})
	c.mu.Unlock()
	c.changes.notify()
	for _, p := range gone {
		c.ended(p)
	}
}

// ended tells onEnd of a pod that ended or went: a pod is told once as
// it ends and again as it goes, since a kubelet may name an ended pod's
// devices until the pod is deleted.
func (c *podCache) ended(p Pod) {
	if c.onEnd != nil {
		c.onEnd(p.clone())
	}
}

// lookup returns a copy of the pod ref names.
func (c *podCache) lookup(ref PodRef) (Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ref.UID != "" {
		p, ok := c.pods[ref.UID]
		ok = ok && p.Namespace == ref.Namespace && p.Name == ref.Name
		return p.clone(), ok
	}
	for _, p := range c.pods {
		if p.Namespace == ref.Namespace && p.Name == ref.Name {
			return p.clone(), true
		}
	}
	return Pod{}, false
}

// uidOf is the UID of the one pod of that name, "" for none or two.
func (c *podCache) uidOf(namespace, name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	uid := ""
	for _, p := range c.pods {
		if p.Namespace == namespace && p.Name == name {
			if uid != "" {
				return ""
			}
			uid = p.UID
		}
	}
	return uid
}

// running reports whether a pod of that name, and UID when not "", is
// cached and has not ended.
func (c *podCache) running(namespace, name, uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.Namespace == namespace && p.Name == name && (uid == "" || p.UID == uid) && !p.Ended {
			return true
		}
	}
	return false
}

// wait returns the pod once the cache holds it. onMiss, if not nil, is
// asked once, after the first miss, for the pod from elsewhere.
func (c *podCache) wait(ctx context.Context, ref PodRef, onMiss func(context.Context, PodRef) (Pod, bool)) (Pod, error) {
	for asked := onMiss == nil; ; asked = true {
		changed := c.changes.next()
		p, ok := c.lookup(ref)
		if ok {
			return p, nil
		}
		if !asked {
			if p, ok := onMiss(ctx, ref); ok {
				return p, nil
			}
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return Pod{}, fmt.Errorf("pod %s: %s: %w: %w", ref, c.describeMiss(ref), ErrPodNotFound, ctx.Err())
		}
	}
}

// describeMiss says what the cache holds under ref's name instead.
func (c *podCache) describeMiss(ref PodRef) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pods {
		if p.Namespace == ref.Namespace && p.Name == ref.Name {
			return fmt.Sprintf("the cache holds a pod of that name with uid %s", p.UID)
		}
	}
	return fmt.Sprintf("no pod of that name among the %d in the cache", len(c.pods))
}

func (p Pod) clone() Pod {
	p.Annotations = maps.Clone(p.Annotations)
	p.Claims = slices.Clone(p.Claims)
	return p
}

// podFrom keeps what the CNI side needs of a Kubernetes pod.
func podFrom(p *corev1.Pod) Pod {
	return Pod{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID), Annotations: p.Annotations, Claims: claimNames(p),
		Ended: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
}

// claimNames lists the names of the pod's ResourceClaims.
func claimNames(p *corev1.Pod) []string {
	var names []string
	for _, c := range p.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			names = append(names, *c.ResourceClaimName)
		}
	}
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			names = append(names, *s.ResourceClaimName)
		}
	}
	return names
}
