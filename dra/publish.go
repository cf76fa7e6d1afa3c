package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
)

// takeOverPage is how many slices a page of the takeover's list holds:
// the list reads the devices, and a small page keeps them few at once
// (128 at most; TestDriverRestartWritesNothing's three slices take two
// pages).
const takeOverPage = 2

// publisher writes the node's pool to ResourceSlices itself, in place of
// the library's resourceslice controller, which kept every device three
// times (its informer's slices, its deep copy of the wanted devices, its
// cache of create answers): 31-35 MB of heap at 2048 VFs
// (docs/performance.md, issue 43's fourth and fifth rounds). It keeps a
// sliceRecord per slice instead and compares hashes; the devices are
// made again for each sync (sliceSender) and dropped after it.
//
// It follows the library's controller
// (k8s.io/dynamic-resource-allocation/resourceslice) but where a comment
// says otherwise: the same names, pool, generations, order of writes and
// taint times. It runs in the sender's goroutine only, but for seen,
// which the watch (restorer) fills.
type publisher struct {
	client resourcev1client.ResourceSliceInterface
	nodes  corev1client.NodeInterface
	driver string
	// node names the node and the one pool.
	node string
	log  *slog.Logger
	// meta is the metadata of a slice as the watch last saw it, nil if
	// it has not: an update keeps the labels, annotations, finalizers
	// and owners someone else gave the slice, as the library's does.
	meta func(name string) *metav1.ObjectMeta
	// seen is what the watch saw since the last sync; wake tells the
	// sender's goroutine.
	seen observations
	wake chan struct{}

	// owner is the Node, the slices' owner, once read.
	owner *metav1.OwnerReference
	// tookOver: the slices an earlier agent left were read.
	tookOver bool
	records  map[string]*sliceRecord
	// generation is the highest pool generation hwnet wrote or found.
	generation int64
	times      taintTimes
}

func newPublisher(client kubernetes.Interface, driver, node string, log *slog.Logger) *publisher {
	return &publisher{client: client.ResourceV1().ResourceSlices(), nodes: client.CoreV1().Nodes(),
		driver: driver, node: node, log: log, meta: func(string) *metav1.ObjectMeta { return nil },
		wake: make(chan struct{}, 1), records: map[string]*sliceRecord{}, times: taintTimes{}}
}

// observe is the watch's: one slice's latest state, applied at the next
// sync.
func (p *publisher) observe(name string, ob observation) { p.seen.add(name, ob) }

// wakeUp makes the sender's goroutine look at what the watch saw.
func (p *publisher) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// selector is the node's slices of the driver.
func (p *publisher) selector() fields.Set { return sliceSelector(p.node, p.driver) }

// sliceSelector selects node's slices of driver: what the publisher lists
// and the restorer watches.
func sliceSelector(node, driver string) fields.Set {
	return fields.Set{resourceapi.ResourceSliceSelectorNodeName: node, resourceapi.ResourceSliceSelectorDriver: driver}
}

// sync makes the node's slices want's one pool: it takes over an earlier
// agent's slices first, writes only the slices that differ, and bumps
// the pool's generation as the library does.
func (p *publisher) sync(ctx context.Context, want *layout) error {
	if err := p.takeOver(ctx); err != nil {
		return err
	}
	p.absorb()
	taints := map[taintID]bool{}
	pl := p.plan(want, taints)
	if err := p.apply(ctx, pl, want, taints); err != nil {
		return err
	}
	p.times.keep(taints)
	return nil
}

// takeOver reads, once, the slices an earlier agent left, a page at a
// time: each one's record and its taints' times; the devices are
// dropped with their page. A slice of another pool is obsolete.
func (p *publisher) takeOver(ctx context.Context) error {
	if p.tookOver {
		return nil
	}
	opts := metav1.ListOptions{FieldSelector: p.selector().String(), Limit: takeOverPage}
	for {
		list, err := p.client.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("DRA driver: list the node's ResourceSlices: %w", err)
		}
		for i := range list.Items {
			p.found(&list.Items[i])
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	p.tookOver = true
	return nil
}

// found records a slice read from the API server as it is.
func (p *publisher) found(s *resourceapi.ResourceSlice) {
	p.records[s.Name] = &sliceRecord{rv: s.ResourceVersion, generation: s.Spec.Pool.Generation,
		hash: hashSpec(&s.Spec), obsolete: s.Spec.Pool.Name != p.node}
	if s.Spec.Pool.Name == p.node {
		p.generation = max(p.generation, s.Spec.Pool.Generation)
		p.times.learn(s.Spec.Devices)
	}
}

// absorb applies to the records what the watch saw since the last call,
// once the takeover read the slices, and says whether a slice must be
// written: someone else changed, deleted or created one.
func (p *publisher) absorb() bool {
	if !p.tookOver {
		return false
	}
	dirty := false
	for name, ob := range p.seen.take() {
		dirty = p.note(name, ob) || dirty
	}
	return dirty
}

// note applies one observation; true if it asks for a write.
func (p *publisher) note(name string, ob observation) bool {
	r, ok := p.records[name]
	switch {
	case !ok && ob.gone:
		return false // hwnet deleted it
	case !ok:
		// Not hwnet's (or seen late after hwnet deleted it: the delete
		// then finds nothing).
		p.records[name] = &sliceRecord{rv: ob.rv, obsolete: true}
		return true
	case ob.gone:
		delete(p.records, name)
		return true
	case !newerRV(ob.rv, r.rv):
		return false // hwnet's own write, or an older one seen late
	default:
		r.rv, r.hash = ob.rv, specHash{}
		return true
	}
}

// plan is what one sync writes, decided as the library's syncPool
// decides it.
type plan struct {
	pool resourceapi.ResourcePool
	// width is the hex digits of the slices' index in their names.
	width int
	// matched is the existing slice of each wanted index.
	matched map[int]string
	// obsolete are deleted first; update are the indexes of matched
	// slices to write (all of them when the generation is bumped).
	obsolete []string
	update   []int
}

// plan compares each wanted slice that has one on the server with its
// record, adding its devices' taints to taints.
func (p *publisher) plan(want *layout, taints map[taintID]bool) plan {
	n := want.slices()
	pl := plan{width: indexWidth(n), matched: map[int]string{}}
	pl.obsolete = p.match(&pl, n)
	numNew := n - len(pl.matched)
	// The library starts from the highest generation on the server; hwnet
	// from the highest it ever wrote or found, so that a pool whose slices
	// someone deleted does not start again at 1.
	pl.pool = resourceapi.ResourcePool{Name: p.node, Generation: p.generation, ResourceSliceCount: int64(n)}
	var changed []int
	for _, i := range slices.Sorted(maps.Keys(pl.matched)) {
		spec := p.spec(pl.pool, want.slice(i))
		addTaints(taints, spec.Devices)
		if p.records[pl.matched[i]].differs(hashSpec(&spec)) {
			changed = append(changed, i)
		}
	}
	pl.update = changed
	// One update alone is atomic: the scheduler sees the pool complete
	// before and after it. More, or a new slice, could show it a mix of
	// old and new slices, which a new generation on all of them prevents.
	if numNew > 0 || len(changed) > 1 {
		pl.pool.Generation++
		pl.update = slices.Sorted(maps.Keys(pl.matched))
	}
	return pl
}

// match gives each wanted index the existing slice whose name has it,
// of the highest generation among them, and returns the rest.
func (p *publisher) match(pl *plan, n int) []string {
	var top int64
	for _, r := range p.records {
		if !r.obsolete {
			top = max(top, r.generation)
		}
	}
	var obsolete []string
	for _, name := range slices.Sorted(maps.Keys(p.records)) {
		r := p.records[name]
		i, ok := sliceIndex(name, pl.width)
		_, taken := pl.matched[i]
		if r.obsolete || r.generation < top || !ok || i >= n || taken {
			obsolete = append(obsolete, name)
			continue
		}
		pl.matched[i] = name
	}
	return obsolete
}

// spec is the slice spec of devs in pool, their taints' times filled in.
func (p *publisher) spec(pool resourceapi.ResourcePool, devs []resourceapi.Device) resourceapi.ResourceSliceSpec {
	p.times.fill(devs)
	node := p.node
	return resourceapi.ResourceSliceSpec{Driver: p.driver, Pool: pool, NodeName: &node, Devices: devs}
}

// apply writes pl as the library does: obsolete slices deleted first
// (devices the node no longer has are withdrawn even if the rest fails),
// then the matched slices updated, then the new ones created, whose
// devices' taints it adds to taints. Each slice's devices are made for
// its write and dropped after it.
func (p *publisher) apply(ctx context.Context, pl plan, want *layout, taints map[taintID]bool) error {
	for _, name := range pl.obsolete {
		if err := p.remove(ctx, name); err != nil {
			return err
		}
	}
	for _, i := range pl.update {
		if err := p.update(ctx, pl.matched[i], p.spec(pl.pool, want.slice(i))); err != nil {
			return err
		}
	}
	for i := range want.slices() {
		if _, ok := pl.matched[i]; ok {
			continue
		}
		spec := p.spec(pl.pool, want.slice(i))
		addTaints(taints, spec.Devices)
		if err := p.create(ctx, sliceGenerateName(i, pl.width, p.driver, p.node), spec); err != nil {
			return err
		}
	}
	return nil
}

// stored records a slice hwnet wrote as spec and the API server answered
// as got. The record's hash is spec's with the times the server gave new
// taints: another field the server dropped (a feature it has off) is
// reported, not written again at every sync, as the library does.
func (p *publisher) stored(spec resourceapi.ResourceSliceSpec, got *resourceapi.ResourceSlice) {
	p.times.learn(got.Spec.Devices)
	p.times.fill(spec.Devices)
	h := hashSpec(&spec)
	if hashSpec(&got.Spec) != h {
		p.log.Error("DRA driver: the API server dropped fields of a ResourceSlice, probably of a feature it has off",
			"slice", got.Name)
	}
	p.records[got.Name] = &sliceRecord{rv: got.ResourceVersion, generation: spec.Pool.Generation, hash: h}
	p.generation = max(p.generation, spec.Pool.Generation)
}

// ownerRef is the Node, the owner of the slices, so that they go with
// it; read once, as the library does.
func (p *publisher) ownerRef(ctx context.Context) (metav1.OwnerReference, error) {
	if p.owner == nil {
		n, err := p.nodes.Get(ctx, p.node, metav1.GetOptions{})
		if err != nil {
			return metav1.OwnerReference{}, fmt.Errorf("read node %s, the slices' owner: %w", p.node, err)
		}
		yes := true
		p.owner = &metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: p.node, UID: n.UID, Controller: &yes}
	}
	return *p.owner, nil
}

// errGone is an update's slice that is no longer there: the next sync
// creates it again.
var errGone = errors.New("the slice is gone")

// sliceErr names the slice an API call failed for.
func sliceErr(verb, name string, err error) error {
	return fmt.Errorf("DRA driver: %s ResourceSlice %s: %w", verb, name, err)
}
