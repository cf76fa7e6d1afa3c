package dra

import (
	"testing"

	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// The sender keeps the devices only until the library took them, makes
// them again for a republish, and never drops a newer send for an older
// one taken meanwhile.
func TestSliceSenderKeepsNoCopy(t *testing.T) {
	made := func(pool string) func() resourceslice.DriverResources {
		return func() resourceslice.DriverResources {
			return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{pool: {}}}
		}
	}
	pool := func(res *resourceslice.DriverResources) string {
		for name := range res.Pools {
			return name
		}
		return ""
	}
	s := newSliceSender(nil)
	if s.next() != nil {
		t.Fatal("devices to send before the first send")
	}
	first := made("first")()
	s.send(&first, made("first"))
	got := s.next()
	if got != &first {
		t.Fatalf("next = %v, want the devices sent", got)
	}
	s.taken(got)
	if s.pending != nil {
		t.Fatal("the sender still holds devices the library took")
	}
	if again := s.next(); again == nil || pool(again) != "first" {
		t.Fatalf("republish: next = %v, want the first devices made again", again)
	}
	s.taken(s.pending)
	sent := s.next()
	second := made("second")()
	s.send(&second, made("second"))
	s.taken(sent) // the older devices reached the library after the newer send
	if got := s.next(); got != &second {
		t.Fatalf("next = %v, want the newer devices, not dropped", got)
	}
}
