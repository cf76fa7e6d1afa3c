package agent

import (
	"testing"

	"github.com/hwnet-io/hwnet/node/pools"
)

// TestSameResource: a plugin restarts for anything it hands out, not for
// a selector edit or the entry's move in the file.
func TestSameResource(t *testing.T) {
	base := pools.Resource{Prefix: "intel.com", Name: "r", DeviceType: pools.NetDevice, Policy: pools.Pack,
		AdditionalInfo: map[string]map[string]string{"*": {"k": "v"}}}
	for _, tt := range []struct {
		name   string
		change func(*pools.Resource)
		same   bool
	}{
		{"unchanged", func(*pools.Resource) {}, true},
		{"moved in the file", func(r *pools.Resource) { r.Index = 3 }, true},
		{"selectors edited", func(r *pools.Resource) { r.Selectors = []pools.Selector{{}} }, true},
		{"isRdma", func(r *pools.Resource) { r.IsRDMA = true }, false},
		{"needVhostNet", func(r *pools.Resource) { r.NeedVhostNet = true }, false},
		{"policy", func(r *pools.Resource) { r.Policy = pools.Spread }, false},
		{"additionalInfo", func(r *pools.Resource) { r.AdditionalInfo = map[string]map[string]string{"*": {"k": "w"}} }, false},
	} {
		b := base
		tt.change(&b)
		if got := sameResource(base, b); got != tt.same {
			t.Errorf("%s: sameResource %t, want %t", tt.name, got, tt.same)
		}
	}
}
