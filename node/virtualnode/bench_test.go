package virtualnode_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// BenchmarkBuildTree builds trees without links with VFs spread over 16
// PFs, up to the 2048 VFs of the biggest node tests use.
func BenchmarkBuildTree(b *testing.B) {
	for _, vfs := range []int{128, 512, 2048} {
		spec := mustParse(b, fmt.Sprintf("name: bench\npfs: [{model: E810-C, count: 16, vfs: %d, numa: [0, 1]}]", vfs/16))
		b.Run("vfs="+strconv.Itoa(vfs), func(b *testing.B) { benchmarkBuild(b, spec, false) })
	}
}

// BenchmarkBuildLinks builds nodes with a veth pair for each netdev; ns/netdev is
// the whole build (netns, veths, tree, state) divided by the netdevs.
func BenchmarkBuildLinks(b *testing.B) {
	vnodetest.RequireRoot(b)
	b.Run("default", func(b *testing.B) { benchmarkBuild(b, virtualnode.DefaultSpec(), true) })
	spec := mustParse(b, "name: bench\npfs: [{model: E810-C, count: 16, vfs: 8}]")
	b.Run("16PFx8VFs", func(b *testing.B) { benchmarkBuild(b, spec, true) })
}

func benchmarkBuild(b *testing.B, spec *virtualnode.Spec, links bool) {
	ctx, db, base := context.Background(), vnodetest.OpenDB(b), vnodetest.Dir(b)
	netdevs := 0
	for i := 0; b.Loop(); i++ {
		n, err := virtualnode.Build(ctx, spec, db, virtualnode.Options{Dir: filepath.Join(base, strconv.Itoa(i)), Links: links})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		netdevs = 0
		for _, f := range n.Devices() {
			if f.Netdev != nil {
				netdevs++
			}
		}
		if err := n.Destroy(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	if links {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*netdevs), "ns/netdev")
	}
}
