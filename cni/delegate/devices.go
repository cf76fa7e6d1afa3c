package delegate

import (
	"container/list"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hwnet-io/hwnet/cni/kube"
	"github.com/hwnet-io/hwnet/podresources"
)

// assignDevices gives every attachment whose network names a resource one
// device of it, by the rule in the package documentation.
func (d *Delegator) assignDevices(ctx context.Context, pod kube.Pod, atts []attachment) error {
	need := map[string][]int{}
	var order []string
	for i, a := range atts {
		if a.resource == "" {
			continue
		}
		if _, seen := need[a.resource]; !seen {
			order = append(order, a.resource)
		}
		need[a.resource] = append(need[a.resource], i)
	}
	if len(need) == 0 {
		return nil
	}
	held, err := d.devices.get(ctx, pod)
	if err != nil {
		return fmt.Errorf("devices of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	for _, res := range order {
		ids := deviceOrder(held, res)
		if len(ids) < len(need[res]) {
			return podFailure("NotEnoughDevices", shortage(pod, res, ids, need[res], atts))
		}
		for k, i := range need[res] {
			atts[i].deviceID = ids[k]
		}
	}
	return nil
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

func shortage(pod kube.Pod, res string, ids []string, idx []int, atts []attachment) error {
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
// churn from growing it forever.
type deviceCache struct {
	src   DeviceSource
	limit int

	mu    sync.Mutex
	order *list.List // of string UIDs, most recent at the front
	pods  map[string]*list.Element
	data  map[string]podresources.Pod
}

func newDeviceCache(src DeviceSource, limit int) *deviceCache {
	return &deviceCache{src: src, limit: limit, order: list.New(), pods: map[string]*list.Element{}, data: map[string]podresources.Pod{}}
}

func (c *deviceCache) get(ctx context.Context, pod kube.Pod) (podresources.Pod, error) {
	if c.src == nil {
		return podresources.Pod{}, fmt.Errorf("no PodResources client (is kubelet's pod-resources socket configured?)")
	}
	if p, ok := c.lookup(pod.UID); ok {
		return p, nil
	}
	p, err := c.src.Get(ctx, pod.Namespace, pod.Name)
	if err != nil {
		return podresources.Pod{}, err
	}
	c.store(pod.UID, p)
	return p, nil
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
	if e, ok := c.pods[uid]; ok {
		c.order.Remove(e)
		delete(c.pods, uid)
		delete(c.data, uid)
	}
}
