package virtualnode

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
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
	RequireRoot(b)
	b.Run("default", func(b *testing.B) { benchmarkBuild(b, DefaultSpec(), true) })
	spec := mustParse(b, "name: bench\npfs: [{model: E810-C, count: 16, vfs: 8}]")
	b.Run("16PFx8VFs", func(b *testing.B) { benchmarkBuild(b, spec, true) })
}

func benchmarkBuild(b *testing.B, spec *Spec, links bool) {
	ctx, db, base := context.Background(), OpenDB(b), testDir(b)
	netdevs := 0
	for i := 0; b.Loop(); i++ {
		n, err := Build(ctx, spec, db, Options{Dir: filepath.Join(base, strconv.Itoa(i)), Links: links})
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
