package dra

import (
	"crypto/sha256"
	"fmt"
	"strconv"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sliceRecord is all the publisher keeps of one slice on the API server
// between syncs: never its devices, which at thousands of VFs are
// megabytes (the library kept them twice, in its informer and its wanted
// copy).
type sliceRecord struct {
	// rv is the resourceVersion hwnet last wrote or saw.
	rv string
	// generation is the slice's spec.pool.generation as hwnet wrote or
	// found it.
	generation int64
	// hash is of the spec as hwnet wrote or found it; zero once someone
	// else changed the slice, so that the next sync writes it again.
	hash specHash
	// obsolete marks a slice hwnet did not write for its pool (another
	// pool's, one someone else created, or one whose create answer was
	// lost): the next sync deletes it.
	obsolete bool
}

// specHash is the SHA-256 of a slice spec's protobuf encoding, which is
// deterministic: the generated code sorts map keys.
type specHash [sha256.Size]byte

func hashSpec(spec *resourceapi.ResourceSliceSpec) specHash {
	b, err := spec.Marshal()
	if err != nil {
		return specHash{} // never matches: the slice is written again
	}
	return sha256.Sum256(b)
}

// differs says whether a slice recorded as r must be written to have the
// spec whose hash is h.
func (r *sliceRecord) differs(h specHash) bool {
	return r.hash == specHash{} || r.hash != h
}

// newerRV says whether resourceVersion a is newer than b. Kubernetes
// calls resourceVersions opaque, but etcd's are integers and the
// library's mutation cache compares them as such too; anything else is
// newer when it is different.
func newerRV(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}

// The library's slice names: a hex index, at least sliceIndexMinWidth
// digits, then the driver and the node, then the API server's random
// suffix (generateName). Kept, so that an agent upgraded from one that
// published through the library takes its slices over unchanged, and
// so that the scheduler, which sorts slices by name, sees them in order.
const sliceIndexMinWidth = 5

// indexWidth is how many hex digits name the index of each of n slices.
func indexWidth(n int) int {
	return max(sliceIndexMinWidth, len(strconv.FormatInt(int64(n-1), 16)))
}

// sliceIndex is the index a slice's name gives, if it has width digits
// and a separator, as the library reads it.
func sliceIndex(name string, width int) (int, bool) {
	if strings.Index(name, "-") != width {
		return 0, false
	}
	i, err := strconv.ParseInt(name[:width], 16, 0)
	return int(i), err == nil
}

func sliceGenerateName(i, width int, driver, node string) string {
	return fmt.Sprintf("%0*x-%s-%s-", width, i, driver, node)
}

// observation is what the watch last saw of one slice: its
// resourceVersion, or that it is gone.
type observation struct {
	rv   string
	gone bool
}

// observations collect the watch's events between syncs, the latest per
// slice name: a few slices' names, however many events.
type observations struct {
	mu     sync.Mutex
	byName map[string]observation
}

func (o *observations) add(name string, ob observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.byName == nil {
		o.byName = map[string]observation{}
	}
	o.byName[name] = ob
}

func (o *observations) take() map[string]observation {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := o.byName
	o.byName = nil
	return out
}

// taintID is one taint of one device.
type taintID struct {
	device, key, value string
	effect             resourceapi.DeviceTaintEffect
}

// taintTimes remember when each taint of the slices was first published
// (the API server sets timeAdded of a taint written without one), so
// that writing a slice again keeps the time of a taint that stayed; the
// library copied it from its copy of the slice. A few entries: only
// tainted devices have one.
type taintTimes map[taintID]metav1.Time

// learn remembers the times of devs' taints not yet known.
func (tt taintTimes) learn(devs []resourceapi.Device) {
	for i := range devs {
		for _, t := range devs[i].Taints {
			id := taintID{devs[i].Name, t.Key, t.Value, t.Effect}
			if _, ok := tt[id]; !ok && t.TimeAdded != nil {
				tt[id] = *t.TimeAdded
			}
		}
	}
}

// fill gives each of devs' taints without a time the one remembered.
func (tt taintTimes) fill(devs []resourceapi.Device) {
	for i := range devs {
		for j := range devs[i].Taints {
			t := &devs[i].Taints[j]
			if at, ok := tt[taintID{devs[i].Name, t.Key, t.Value, t.Effect}]; ok && t.TimeAdded == nil {
				t.TimeAdded = &at
			}
		}
	}
}

// addTaints adds devs' taints to set.
func addTaints(set map[taintID]bool, devs []resourceapi.Device) {
	for i := range devs {
		for _, t := range devs[i].Taints {
			set[taintID{devs[i].Name, t.Key, t.Value, t.Effect}] = true
		}
	}
}

// keep forgets the taints not wanted, those of no wanted slice: one that
// comes back is new, with a new time.
func (tt taintTimes) keep(wanted map[taintID]bool) {
	for id := range tt {
		if !wanted[id] {
			delete(tt, id)
		}
	}
}
