package discovery_test

import (
	"fmt"
	"testing"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// BenchmarkDiscovery scans trees of 16 PFs with 128, 512 and 2048 VFs in
// all. The foundation issue's bound: 2048 VFs in under 100 ms, i.e. cost
// linear in devices; ns/device should stay flat across sizes.
func BenchmarkDiscovery(b *testing.B) { benchmarkDiscovery(b, "E810-C", false) }

// BenchmarkDiscoveryLinked is the agent's own path (root): every netdev a
// real veth link with its representor peer, so netlink is dumped and
// matched too.
func BenchmarkDiscoveryLinked(b *testing.B) { benchmarkDiscovery(b, "E810-C", true) }

// BenchmarkDiscoveryRDMA is the same on ConnectX-6 InfiniBand VFs, each
// with an RDMA device whose character devices discovery lists and checks.
func BenchmarkDiscoveryRDMA(b *testing.B) { benchmarkDiscovery(b, "ConnectX-6", false) }

func benchmarkDiscovery(b *testing.B, model string, links bool) {
	db := vnodetest.OpenDB(b)
	for _, vfs := range []int{128, 512, 2048} {
		b.Run(fmt.Sprintf("vfs=%d", vfs), func(b *testing.B) {
			spec := &virtualnode.Spec{Name: fmt.Sprintf("bench-%d", vfs), PFs: []virtualnode.PFSpec{
				{Model: model, Count: 16, VFs: vfs / 16, NUMA: []int{0, 1}},
			}}
			node := vnodetest.BuildForTest(b, spec, db, links)
			opts := discovery.Options{}
			if links {
				opts.Netns = "/run/netns/" + node.NetnsName()
			}
			var inv *discovery.Inventory
			b.ResetTimer()
			for b.Loop() {
				inv = discover(b, db, node, opts)
			}
			if inv.Len() != vfs+16 {
				b.Fatalf("found %d functions, want %d", inv.Len(), vfs+16)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(inv.Len()), "ns/device")
		})
	}
}
