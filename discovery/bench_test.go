package discovery_test

import (
	"fmt"
	"testing"

	"github.com/hwnet-io/hwnet/discovery"
	"github.com/hwnet-io/hwnet/test/virtualnode"
)

// BenchmarkDiscovery scans trees of 16 PFs with 128, 512 and 2048 VFs in
// all. The foundation issue's bound: 2048 VFs in under 100 ms, i.e. cost
// linear in devices; ns/device should stay flat across sizes.
func BenchmarkDiscovery(b *testing.B) {
	db := openDB(b)
	for _, vfs := range []int{128, 512, 2048} {
		b.Run(fmt.Sprintf("vfs=%d", vfs), func(b *testing.B) {
			spec := &virtualnode.Spec{Name: "bench", PFs: []virtualnode.PFSpec{
				{Model: "E810-C", Count: 16, VFs: vfs / 16, NUMA: []int{0, 1}},
			}}
			node := buildTree(b, db, spec)
			var inv *discovery.Inventory
			b.ResetTimer()
			for b.Loop() {
				inv = discover(b, db, node, discovery.Options{})
			}
			if inv.Len() != vfs+16 {
				b.Fatalf("found %d functions, want %d", inv.Len(), vfs+16)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(inv.Len()), "ns/device")
		})
	}
}
