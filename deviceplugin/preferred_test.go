package deviceplugin

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/pools"
)

// twoNodeLayout is two NUMA nodes with two PFs of 8 VFs each: PFs A and B
// on node 0, C and D on node 1. VF i of PF X has the ID "<x><i>".
func twoNodeLayout() map[string]Placement {
	placement := map[string]Placement{}
	for _, pf := range []struct {
		name string
		node int
	}{{"A", 0}, {"B", 0}, {"C", 1}, {"D", 1}} {
		for i := range 8 {
			placement[fmt.Sprintf("%s%d", strings.ToLower(pf.name), i)] = Placement{NUMANode: pf.node, PF: pf.name}
		}
	}
	return placement
}

// ids expands "a0-3 c5" into a0 a1 a2 a3 c5.
func ids(spec string) []string {
	var out []string
	for _, f := range strings.Fields(spec) {
		var pf string
		var from, to int
		if n, _ := fmt.Sscanf(f, "%1s%d-%d", &pf, &from, &to); n == 3 {
			for i := from; i <= to; i++ {
				out = append(out, fmt.Sprintf("%s%d", pf, i))
			}
			continue
		}
		out = append(out, f)
	}
	return out
}

const everyVF = "a0-7 b0-7 c0-7 d0-7"

func TestPrefer(t *testing.T) {
	tests := []struct {
		name      string
		available string
		must      string
		size      int
		policy    pools.Policy
		want      string
	}{
		{"one device: lowest node, lowest PF", everyVF, "", 1, "", "a0"},
		{"the node with the most free devices", "a0-7 b0-3 c0-7 d0-7", "", 1, pools.Pack, "c0"},
		{"pack: the fullest PF that fits keeps whole PFs free", "a0-7 b5-7", "", 2, pools.Pack, "b5-6"},
		{"pack: no PF fits, fill the biggest then best fit", "a0-7 b0-7", "", 10, pools.Pack, "a0-7 b0-1"},
		{"pack: best fit after filling", "a0-7 b0-7 c0-7 d0-7", "", 11, pools.Pack, "a0-7 b0-2"},
		{"pack: must-include PF first", everyVF, "c3", 3, pools.Pack, "c0-1 c3"},
		{"pack: must-include PF filled, then best fit", everyVF, "d6", 10, pools.Pack, "c0-1 d0-7"},
		{"pack: PF with more must-include first", everyVF, "a1 b2 b3", 4, pools.Pack, "a1 b0 b2-3"},
		{"must-include on a node that cannot hold the rest", "a0 c0-7 d0-7", "a0", 4, pools.Pack, "a0 c0-2"},
		{"must-include on two nodes: the first one fills", everyVF, "a0 c0", 4, pools.Pack, "a0-2 c0"},
		{"must-include only, even across nodes", everyVF, "a5 d5", 2, pools.Pack, "a5 d5"},
		{"must-include not in the available list", "b0-7", "a0", 2, pools.Pack, "a0 b0"},
		{"too big for one node: fewest nodes", everyVF, "", 20, pools.Pack, "a0-7 b0-7 c0-3"},
		{"too big for one node: fullest node first", "a0-3 b0-7 c0-7 d0-7", "", 20, pools.Pack, "a0-3 c0-7 d0-7"},
		{"a node that fits beats a fuller split", "a0-7 b0-7 c0-7 d0-1", "", 9, pools.Pack, "a0-7 b0"},
		{"spread: round robin over the node's PFs", everyVF, "", 4, pools.Spread, "a0-1 b0-1"},
		{"spread: must-include counts as used", everyVF, "a0", 3, pools.Spread, "a0-1 b0"},
		{"spread: most free PF first", "a0-7 b0-2", "", 2, pools.Spread, "a0 b0"},
		{"spread: drains the small PF last", "a0-7 b0-1", "", 6, pools.Spread, "a0-3 b0-1"},
		{"spread: too big for one node", everyVF, "", 18, pools.Spread, "a0-7 b0-7 c0 d0"},
		{"whole pool", everyVF, "", 32, pools.Pack, everyVF},
		{"duplicates in the request", "a0 a0 a1 a1", "", 2, pools.Pack, "a0-1"},
		{"unknown devices count last", "x9 b4", "", 1, pools.Pack, "b4"},
		{"unknown devices when needed", "x9 b4", "", 2, pools.Pack, "b4 x9"},
	}
	layout := NewLayout(twoNodeLayout())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := PreferenceRequest{Available: ids(tt.available), MustInclude: ids(tt.must), Size: tt.size, Policy: tt.policy}
			got, err := layout.Prefer(req)
			if err != nil {
				t.Fatal(err)
			}
			if want := ids(tt.want); !slices.Equal(got, want) {
				t.Errorf("Prefer = %v, want %v", got, want)
			}
			// The answer depends on the request, not on its order.
			slices.Reverse(req.Available)
			slices.Reverse(req.MustInclude)
			again, err := layout.Prefer(req)
			if err != nil || !slices.Equal(again, got) {
				t.Errorf("with the lists reversed Prefer = %v, %v; want %v", again, err, got)
			}
		})
	}
}

func TestPreferRejects(t *testing.T) {
	tests := []struct {
		name, available, must string
		size                  int
		wantErr               string
	}{
		{"zero size", "a0", "", 0, "allocation size 0 is not positive"},
		{"more must-include than size", "a0-3", "a0 a1", 1, "allocation size 1 is smaller than the 2 must-include devices"},
		{"too few devices", "a0-1", "a0", 4, "needs 3 devices besides the 1 must-include ones, only 1 are available"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewLayout(twoNodeLayout()).Prefer(PreferenceRequest{Available: ids(tt.available), MustInclude: ids(tt.must), Size: tt.size})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Prefer error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzPrefer checks what kubelet relies on for any request: exactly Size
// distinct devices, sorted, every must-include one, the others available.
func FuzzPrefer(f *testing.F) {
	f.Add(uint32(0xffffffff), uint32(0), uint8(4), false)
	f.Add(uint32(0x0f0f0f0f), uint32(0x00010001), uint8(9), true)
	f.Add(uint32(0x000000ff), uint32(0x80000000), uint8(3), false)
	layout := NewLayout(twoNodeLayout())
	all := ids(everyVF)
	f.Fuzz(func(t *testing.T, availMask, mustMask uint32, size uint8, spread bool) {
		req := PreferenceRequest{Size: int(size)}
		if spread {
			req.Policy = pools.Spread
		}
		for i, id := range all {
			if availMask&(1<<i) != 0 {
				req.Available = append(req.Available, id)
			}
			if mustMask&(1<<i) != 0 {
				req.MustInclude = append(req.MustInclude, id)
			}
		}
		got, err := layout.Prefer(req)
		if err != nil {
			return
		}
		if len(got) != req.Size || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("Prefer(%+v) = %v: not %d sorted distinct devices", req, got, req.Size)
		}
		for _, id := range req.MustInclude {
			if !slices.Contains(got, id) {
				t.Fatalf("Prefer(%+v) = %v lacks must-include %s", req, got, id)
			}
		}
		for _, id := range got {
			if !slices.Contains(req.Available, id) && !slices.Contains(req.MustInclude, id) {
				t.Fatalf("Prefer(%+v) = %v: %s was not offered", req, got, id)
			}
		}
	})
}
