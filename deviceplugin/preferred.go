package deviceplugin

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hwnet-io/hwnet/node/pools"
)

// Placement is where a device sits: all that Layout.Prefer weighs.
type Placement struct {
	// NUMANode is -1 when unknown.
	NUMANode int
	// PF is the PCI address of the device's PF; "" for a standalone NIC,
	// which then counts as a PF of its own.
	PF string
}

// PreferenceRequest is one container's GetPreferredAllocation request.
type PreferenceRequest struct {
	Available   []string
	MustInclude []string
	Size        int
	Policy      pools.Policy
}

// Layout is where each device of a pool sits, indexed once so that Prefer
// looks each offered device up only once.
type Layout struct {
	index map[string]int // device ID -> index in keys
	keys  []groupKey
}

// groupKey is a PF on a NUMA node: the devices Prefer treats alike.
type groupKey struct {
	node int
	pf   string
}

// NewLayout indexes the placement of a pool's devices.
func NewLayout(placement map[string]Placement) *Layout {
	l := &Layout{index: make(map[string]int, len(placement))}
	keyIndex := map[groupKey]int{}
	for id, p := range placement {
		key := groupKey{node: p.NUMANode, pf: cmp.Or(p.PF, id)}
		i, ok := keyIndex[key]
		if !ok {
			i = len(l.keys)
			keyIndex[key] = i
			l.keys = append(l.keys, key)
		}
		l.index[id] = i
	}
	return l
}

// Prefer chooses req.Size devices, sorted by ID, for kubelet to allocate.
// Every must-include device is in the answer, whatever its NUMA node; the
// rest come from the available devices, ones the layout does not know
// counting as a PF of their own on NUMA node -1. The rules, in order:
//
//  1. NUMA: the remaining devices come from as few NUMA nodes as possible.
//     Nodes holding must-include devices are filled first (most
//     must-include devices first); then nodes with the most free devices,
//     then nodes with a known NUMA node, then the lowest node. When no
//     node holds must-include devices, this takes the single node that
//     can satisfy the request with the most free devices, if there is one.
//  2. PFs, within each node, by policy:
//     Pack (the default) touches as few PFs as possible and keeps whole
//     PFs free for later large requests: first it fills the PFs that hold
//     must-include devices (most first); then, while devices are still
//     needed, it takes the PF with the fewest free devices that can take
//     all of the rest (best fit) or, when no PF can, all of the PF with the
//     most free devices.
//     Spread takes devices one at a time from the PF with the fewest
//     devices in the answer so far (must-include ones count), then the
//     most free devices left, so the answer covers as many PFs as it can.
//  3. Within a PF the lowest device IDs go first. Remaining ties go to the
//     lowest PF address, so the answer depends only on the request.
//
// It fails when the request cannot be met: a size that is not positive or
// smaller than the must-include list, or too few devices. It only reads
// l, so calls may run at once.
func (l *Layout) Prefer(req PreferenceRequest) ([]string, error) {
	must := slices.Compact(slices.Sorted(slices.Values(req.MustInclude)))
	if req.Size <= 0 {
		return nil, fmt.Errorf("allocation size %d is not positive", req.Size)
	}
	if req.Size < len(must) {
		return nil, fmt.Errorf("allocation size %d is smaller than the %d must-include devices", req.Size, len(must))
	}
	nodes, free := l.group(req.Available, must)
	need := req.Size - len(must)
	if free < need {
		return nil, fmt.Errorf("allocation size %d needs %d devices besides the %d must-include ones, only %d are available",
			req.Size, need, len(must), free)
	}
	out := make([]string, 0, req.Size)
	out = append(out, must...)
	for _, n := range nodes {
		if need == 0 {
			break
		}
		take := min(need, n.free)
		if req.Policy == pools.Spread {
			out = spread(n.pfs, take, out)
		} else {
			out = pack(n.pfs, take, out)
		}
		need -= take
	}
	slices.Sort(out)
	return out, nil
}

// pfGroup is the devices of one PF that Prefer may choose.
type pfGroup struct {
	pf    string
	free  []string // sorted, without duplicates
	must  int      // must-include devices on the PF
	taken int      // devices of free already chosen
	node  *numaGroup
}

func (g *pfGroup) left() int { return len(g.free) - g.taken }

func (g *pfGroup) take(n int, out []string) []string {
	out = append(out, g.free[g.taken:g.taken+n]...)
	g.taken += n
	return out
}

// numaGroup is the PFs of one NUMA node.
type numaGroup struct {
	node       int
	pfs        []*pfGroup
	free, must int
}

// grouping collects the offered devices into PF groups per NUMA node.
type grouping struct {
	layout  *Layout
	known   []*pfGroup // by index in layout.keys
	unknown map[string]*pfGroup
	nodes   map[int]*numaGroup
	all     []*pfGroup
}

// group sorts the available devices other than must into PF groups per
// NUMA node, in the order rule 1 of Prefer fills nodes, and counts them.
func (l *Layout) group(available, must []string) ([]*numaGroup, int) {
	g := &grouping{layout: l, known: make([]*pfGroup, len(l.keys)), nodes: map[int]*numaGroup{}}
	for _, id := range available {
		if _, isMust := slices.BinarySearch(must, id); !isMust {
			pg := g.of(id)
			pg.free = append(pg.free, id)
		}
	}
	for _, id := range must {
		pg := g.of(id)
		pg.must++
		pg.node.must++
	}
	total := 0
	for _, pg := range g.all {
		slices.Sort(pg.free)
		pg.free = slices.Compact(pg.free)
		pg.node.free += len(pg.free)
		total += len(pg.free)
	}
	return sortedNodes(g.nodes), total
}

// of returns the group of a device; one the layout does not know is a PF
// of its own on NUMA node -1.
func (g *grouping) of(id string) *pfGroup {
	if i, ok := g.layout.index[id]; ok {
		if g.known[i] == nil {
			g.known[i] = g.newGroup(g.layout.keys[i])
		}
		return g.known[i]
	}
	if g.unknown == nil {
		g.unknown = map[string]*pfGroup{}
	}
	if g.unknown[id] == nil {
		g.unknown[id] = g.newGroup(groupKey{node: -1, pf: id})
	}
	return g.unknown[id]
}

func (g *grouping) newGroup(key groupKey) *pfGroup {
	n := g.nodes[key.node]
	if n == nil {
		n = &numaGroup{node: key.node}
		g.nodes[key.node] = n
	}
	pg := &pfGroup{pf: key.pf, node: n}
	n.pfs = append(n.pfs, pg)
	g.all = append(g.all, pg)
	return pg
}

func sortedNodes(nodes map[int]*numaGroup) []*numaGroup {
	out := make([]*numaGroup, 0, len(nodes))
	for _, n := range nodes {
		slices.SortFunc(n.pfs, func(a, b *pfGroup) int { return cmp.Compare(a.pf, b.pf) })
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b *numaGroup) int {
		return cmp.Or(
			cmp.Compare(b.must, a.must),
			cmp.Compare(b.free, a.free),
			compareKnown(a.node, b.node),
			cmp.Compare(a.node, b.node))
	})
	return out
}

// compareKnown puts known NUMA nodes before -1.
func compareKnown(a, b int) int {
	switch {
	case a >= 0 && b < 0:
		return -1
	case a < 0 && b >= 0:
		return 1
	}
	return 0
}

// pack takes n devices from pfs by Pack's rule (see Prefer).
func pack(pfs []*pfGroup, n int, out []string) []string {
	withMust := slices.Clone(pfs)
	slices.SortStableFunc(withMust, func(a, b *pfGroup) int { return cmp.Compare(b.must, a.must) })
	for _, g := range withMust {
		if g.must == 0 || n == 0 {
			break
		}
		k := min(n, g.left())
		out, n = g.take(k, out), n-k
	}
	for n > 0 {
		g := bestFit(pfs, n)
		if g == nil {
			g = mostFree(pfs)
		}
		k := min(n, g.left())
		out, n = g.take(k, out), n-k
	}
	return out
}

// bestFit is the PF with the fewest free devices that has at least n.
func bestFit(pfs []*pfGroup, n int) *pfGroup {
	var best *pfGroup
	for _, g := range pfs {
		if g.left() >= n && (best == nil || g.left() < best.left()) {
			best = g
		}
	}
	return best
}

func mostFree(pfs []*pfGroup) *pfGroup {
	var best *pfGroup
	for _, g := range pfs {
		if g.left() > 0 && (best == nil || g.left() > best.left()) {
			best = g
		}
	}
	return best
}

// spread takes n devices from pfs one at a time by Spread's rule (see
// Prefer).
func spread(pfs []*pfGroup, n int, out []string) []string {
	for ; n > 0; n-- {
		var best *pfGroup
		for _, g := range pfs {
			if g.left() > 0 && (best == nil || lessLoaded(g, best)) {
				best = g
			}
		}
		out = best.take(1, out)
	}
	return out
}

func lessLoaded(a, b *pfGroup) bool {
	if la, lb := a.must+a.taken, b.must+b.taken; la != lb {
		return la < lb
	}
	return a.left() > b.left()
}
