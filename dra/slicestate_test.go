package dra

import (
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The slices' names are the library's: the index in hex, at least five
// digits and as many as the highest index needs, read back only at that
// width.
func TestSliceNames(t *testing.T) {
	for _, tt := range []struct {
		slices, index int
		name          string
		back          int
		ok            bool
	}{
		{1, 0, "00000-hwnet.io-node-a-", 0, true},
		{32, 31, "0001f-hwnet.io-node-a-", 31, true},
		{0x100000, 0xfffff, "fffff-hwnet.io-node-a-", 0xfffff, true},
		{0x100001, 0x100000, "100000-hwnet.io-node-a-", 0x100000, true},
	} {
		w := indexWidth(tt.slices)
		name := sliceGenerateName(tt.index, w, "hwnet.io", "node-a")
		if name != tt.name {
			t.Errorf("slice %d of %d: name %s, want %s", tt.index, tt.slices, name, tt.name)
		}
		if i, ok := sliceIndex(name+"x7k2p", w); i != tt.back || ok != tt.ok {
			t.Errorf("%s: index %d, %v, want %d, %v", name, i, ok, tt.back, tt.ok)
		}
	}
	for _, name := range []string{"0000-hwnet.io-node-a-x", "000000-hwnet.io-node-a-x", "0000g-hwnet.io-node-a-x", "hwnet.io-node-a-x", "someone-else"} {
		if i, ok := sliceIndex(name, sliceIndexMinWidth); ok {
			t.Errorf("%s: index %d at width %d, want none", name, i, sliceIndexMinWidth)
		}
	}
}

// A resourceVersion the watch sees is newer than hwnet's only if it is a
// larger integer, or, not an integer, a different one: an older event
// seen late is not someone else's write.
func TestNewerRV(t *testing.T) {
	for _, tt := range []struct {
		seen, known string
		want        bool
	}{
		{"12", "12", false},
		{"11", "12", false},
		{"13", "12", true},
		{"100", "99", true},
		{"b", "a", true},
		{"a", "a", false},
	} {
		if got := newerRV(tt.seen, tt.known); got != tt.want {
			t.Errorf("newerRV(%s, %s) = %v, want %v", tt.seen, tt.known, got, tt.want)
		}
	}
}

// A taint keeps the time it was first published while it stays, on any
// device's slice, and is forgotten once it goes.
func TestTaintTimes(t *testing.T) {
	at := metav1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	taint := func(value string, added *metav1.Time) resourceapi.DeviceTaint {
		return resourceapi.DeviceTaint{Key: TaintKey, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule, TimeAdded: added}
	}
	times := taintTimes{}
	times.learn([]resourceapi.Device{{Name: "a", Taints: []resourceapi.DeviceTaint{taint("down", &at)}}})
	want := []resourceapi.Device{{Name: "a", Taints: []resourceapi.DeviceTaint{taint("down", nil), taint("other", nil)}}, {Name: "b", Taints: []resourceapi.DeviceTaint{taint("down", nil)}}}
	times.fill(want)
	if got := want[0].Taints[0].TimeAdded; got == nil || !got.Equal(&at) {
		t.Errorf("a's taint that stayed: added %v, want %v", got, at)
	}
	if want[0].Taints[1].TimeAdded != nil || want[1].Taints[0].TimeAdded != nil {
		t.Error("a new taint (another value, another device) got a time: the API server sets it")
	}
	wanted := map[taintID]bool{}
	addTaints(wanted, []resourceapi.Device{{Name: "b", Taints: []resourceapi.DeviceTaint{taint("down", nil)}}})
	times.keep(wanted)
	if len(times) != 0 {
		t.Errorf("times %v kept for taints no longer published", times)
	}
}
