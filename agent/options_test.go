package agent

import (
	"io"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/pools"
)

// TestParseFlagsRejects: bad flags are errors that name the flag.
func TestParseFlagsRejects(t *testing.T) {
	for _, args := range [][]string{
		{"--poll-interval=-1s"},
		{"--rescan-interval=0s"},
		{"--devinfo-gc-interval=0s"},
		{"--log-format=xml"},
		{"--log-level=loud"},
		{"stray"},
	} {
		_, err := parseFlags(args, io.Discard)
		if err == nil {
			t.Errorf("%v: accepted", args)
			continue
		}
		name := strings.TrimLeft(strings.SplitN(args[0], "=", 2)[0], "-")
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%v: error %q does not name %s", args, err, name)
		}
	}
}

// TestParseFlagsReleaseStartupPages: the binary gives its start-up pages
// back unless told not to (the RSS in docs/performance.md assumes it).
func TestParseFlagsReleaseStartupPages(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"--release-startup-pages=false"}, false}} {
		o, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if o.ReleaseStartupPages != tt.want {
			t.Errorf("%v: ReleaseStartupPages %t, want %t", tt.args, o.ReleaseStartupPages, tt.want)
		}
	}
}

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
