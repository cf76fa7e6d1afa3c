package pools_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// discoverNode builds spec as a tree-only virtual node (no root needed)
// and discovers it, with vdpa as the node's vDPA devices.
func discoverNode(t testing.TB, db *hwdb.DB, spec *virtualnode.Spec, vdpa vnodetest.VDPA) *discovery.Inventory {
	t.Helper()
	node := vnodetest.BuildForTest(t, spec, db, false)
	inv, err := discovery.Discover(context.Background(), discovery.Options{
		SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(), DB: db, ESwitch: vnodetest.NoESwitch{}, VDPA: vdpa,
	})
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

func mustParse(t testing.TB, config string) *pools.Config {
	t.Helper()
	cfg, err := pools.Parse([]byte(config))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

// vfs returns the addresses of VFs first to last of the virtual node PF
// on bus: the node puts VF i at device 1+i/8, function i%8 of its PF's bus.
func vfs(bus string, first, last int) []string {
	var out []string
	for i := first; i <= last; i++ {
		out = append(out, fmt.Sprintf("0000:%s:%02x.%d", bus, 1+i/8, i%8))
	}
	return out
}

// poolIDs returns each pool's full name and device IDs, in order.
func poolIDs(res *pools.Result) []namedIDs {
	var out []namedIDs
	for _, p := range res.Pools {
		ids := []string{}
		for _, d := range p.Devices {
			ids = append(ids, d.ID)
		}
		out = append(out, namedIDs{p.Resource.FullName(), ids})
	}
	return out
}

type namedIDs struct {
	Name string
	IDs  []string
}
