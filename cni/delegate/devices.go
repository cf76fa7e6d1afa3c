package delegate

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// assignDevices gives every attachment whose network names a resource one
// device of it, by the rule in the package documentation: from the pod's
// DRA claims when they hold spare devices of the resource (its pool is in
// DRA mode), else from what kubelet's device plugins allocated.
func (d *Delegator) assignDevices(ctx context.Context, pod cache.Pod, atts []attachment, spare map[string][]*netclaim.Device) error {
	need, order := devicesNeeded(atts)
	var held *podresources.Pod
	for _, res := range order {
		if claimed := spare[res]; len(claimed) > 0 {
			if len(claimed) < len(need[res]) {
				return podFailure("NotEnoughDevices", shortage(pod, res, claimedIDs(claimed), need[res], atts))
			}
			for k, i := range need[res] {
				atts[i].useClaimDevice(claimed[k])
			}
			continue
		}
		if held == nil {
			p, err := d.devices.get(ctx, pod)
			if err != nil {
				return fmt.Errorf("devices of pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			held = &p
		}
		ids := deviceOrder(*held, res)
		if len(ids) < len(need[res]) {
			return podFailure("NotEnoughDevices", shortage(pod, res, ids, need[res], atts))
		}
		for k, i := range need[res] {
			atts[i].deviceID = ids[k]
		}
	}
	return nil
}

// devicesNeeded lists, by resource, the attachments that need a device and
// have none yet, and the resources in order of first need.
func devicesNeeded(atts []attachment) (map[string][]int, []string) {
	need := map[string][]int{}
	var order []string
	for i, a := range atts {
		if a.resource == "" || a.deviceID != "" {
			continue
		}
		if _, seen := need[a.resource]; !seen {
			order = append(order, a.resource)
		}
		need[a.resource] = append(need[a.resource], i)
	}
	return need, order
}

func claimedIDs(devs []*netclaim.Device) []string {
	ids := make([]string, len(devs))
	for i, d := range devs {
		ids[i] = d.PCIAddress
	}
	return ids
}

// deviceOrder lists the pod's devices of a resource: containers in kubelet's
// order, each container's devices sorted (podresources sorts them).
func deviceOrder(pod podresources.Pod, resource string) []string {
	var ids []string
	for _, c := range pod.Containers {
		ids = append(ids, c.Devices[resource]...)
	}
	return ids
}

func shortage(pod cache.Pod, res string, ids []string, idx []int, atts []attachment) error {
	nets := make([]string, len(idx))
	for k, i := range idx {
		nets[k] = fmt.Sprintf("%s (%s)", atts[i].network, atts[i].ifName)
	}
	return fmt.Errorf("pod %s/%s holds %d device(s) of %s but its networks need %d: %s; request %s: %d in the pod's containers' resources",
		pod.Namespace, pod.Name, len(ids), res, len(idx), strings.Join(nets, ", "), res, len(idx))
}

// deviceCache remembers each pod's allocation by UID. Kubelet never changes
// a running pod's devices, so one PodResources Get serves every attachment
// and every sandbox re-creation of the pod; the bound keeps a node with pod
// churn from growing it forever. A Get can start before anyone waits for
// it (prefetch), and callers asking for a pod whose Get is under way share
// it.
type deviceCache struct {
	src   DeviceSource
	limit int

	mu       sync.Mutex
	order    *list.List // of string UIDs, most recent at the front
	pods     map[string]*list.Element
	data     map[string]podresources.Pod
	inflight map[string]*deviceFetch
	// early counts the Gets pod events started per pod not cached yet.
	early map[string]int
}

// earlyTries bounds the Gets pod events start for one pod: one that selects
// networks without devices is never cached, and must not have kubelet
// asked at each of its status changes.
const earlyTries = 3

// deviceFetch is one PodResources Get; done closes when pod and err are set.
type deviceFetch struct {
	// early says a pod event started it, maybe before kubelet admitted
	// the pod.
	early bool
	done  chan struct{}
	pod   podresources.Pod
	err   error
}

// fetchTimeout bounds a Get that outlives the request that started it.
const fetchTimeout = 30 * time.Second

func newDeviceCache(src DeviceSource, limit int) *deviceCache {
	return &deviceCache{src: src, limit: limit, order: list.New(), pods: map[string]*list.Element{},
		data: map[string]podresources.Pod{}, inflight: map[string]*deviceFetch{}, early: map[string]int{}}
}

func (c *deviceCache) get(ctx context.Context, pod cache.Pod) (podresources.Pod, error) {
	if c.src == nil {
		return podresources.Pod{}, fmt.Errorf("no PodResources client (is kubelet's pod-resources socket configured?)")
	}
	if p, ok := c.lookup(pod.UID); ok {
		return p, nil
	}
	f := c.start(ctx, pod, false)
	p, err := f.wait(ctx)
	if f.early && (err != nil || !holdsDevices(p)) && ctx.Err() == nil {
		// A pod event's Get may have reached kubelet before it admitted
		// the pod; only an answer asked for after this call counts.
		p, err = c.start(ctx, pod, false).wait(ctx)
	}
	return p, err
}

func (f *deviceFetch) wait(ctx context.Context) (podresources.Pod, error) {
	select {
	case <-f.done:
		return f.pod, f.err
	case <-ctx.Done():
		return podresources.Pod{}, ctx.Err()
	}
}

// prefetch starts the Get of a pod's devices, so that kubelet's answer
// arrives while the networks are resolved rather than after.
func (c *deviceCache) prefetch(ctx context.Context, pod cache.Pod) { c.startUncached(ctx, pod, false) }

// prefetchEarly is prefetch for a pod event, at most earlyTries times a
// pod: an event may come before kubelet allocated the pod's devices, and
// the answer, holding none, is not cached.
func (c *deviceCache) prefetchEarly(pod cache.Pod) {
	if c.src != nil && c.countEarly(pod.UID) {
		c.startUncached(context.Background(), pod, true)
	}
}

// startUncached starts the Get of a pod not cached yet, unless one is
// under way.
func (c *deviceCache) startUncached(ctx context.Context, pod cache.Pod, early bool) {
	if c.src == nil || pod.UID == "" {
		return
	}
	if _, ok := c.lookup(pod.UID); !ok {
		c.start(ctx, pod, early)
	}
}

// countEarly counts one more early Get of a pod not cached yet, and says
// whether it is within earlyTries.
func (c *deviceCache) countEarly(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, cached := c.pods[uid]; cached || uid == "" || c.early[uid] >= earlyTries {
		return false
	}
	if len(c.early) >= c.limit {
		clear(c.early)
	}
	c.early[uid]++
	return true
}

// start returns the Get under way for the pod, starting one if none is.
func (c *deviceCache) start(ctx context.Context, pod cache.Pod, early bool) *deviceFetch {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.inflight[pod.UID]; ok && pod.UID != "" {
		return f
	}
	f := &deviceFetch{early: early, done: make(chan struct{})}
	if pod.UID != "" {
		c.inflight[pod.UID] = f
	}
	go c.fetch(context.WithoutCancel(ctx), pod, f)
	return f
}

func (c *deviceCache) fetch(ctx context.Context, pod cache.Pod, f *deviceFetch) {
	defer close(f.done)
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	f.pod, f.err = c.src.Get(ctx, pod.Namespace, pod.Name)
	if f.err == nil {
		c.store(pod.UID, f.pod)
	}
	c.mu.Lock()
	delete(c.inflight, pod.UID)
	c.mu.Unlock()
}

func (c *deviceCache) lookup(uid string) (podresources.Pod, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.pods[uid]
	if !ok || uid == "" {
		return podresources.Pod{}, false
	}
	c.order.MoveToFront(e)
	return c.data[uid], true
}

func (c *deviceCache) store(uid string, p podresources.Pod) {
	if uid == "" || !holdsDevices(p) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[uid]; ok {
		return
	}
	c.pods[uid] = c.order.PushFront(uid)
	c.data[uid] = p
	for c.order.Len() > c.limit {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.pods, oldest.Value.(string))
		delete(c.data, oldest.Value.(string))
	}
}

// holdsDevices is false for an answer kubelet may complete later (a pod
// whose allocation it has not recorded yet), which must not be cached.
func holdsDevices(p podresources.Pod) bool {
	for _, c := range p.Containers {
		for _, ids := range c.Devices {
			if len(ids) > 0 {
				return true
			}
		}
	}
	return false
}

func (c *deviceCache) forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.early, uid)
	if e, ok := c.pods[uid]; ok {
		c.order.Remove(e)
		delete(c.pods, uid)
		delete(c.data, uid)
	}
}
