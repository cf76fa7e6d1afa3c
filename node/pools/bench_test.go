package pools_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// BenchmarkMatch divides 2048 VFs (8 E810-C with 256 each, 64 of them on
// vfio-pci) among five pools by ranges, tags, models and drivers, with 65
// conflicts: the work of every re-discovery. The aim is well under 1 ms.
func BenchmarkMatch(b *testing.B) {
	inv := discoverNode(b, vnodetest.OpenDB(b), &virtualnode.Spec{Name: "bench-match", PFs: []virtualnode.PFSpec{
		{Model: "E810-C", Count: 8, VFs: 256, VFIO: "192-255", NUMA: []int{0, 1}},
	}}, nil)
	if len(inv.PFs) != 8 {
		b.Fatalf("found %d PFs, want 8; problems: %q", len(inv.PFs), inv.Problems)
	}
	var rest []string
	for _, pf := range inv.PFs[2:] {
		rest = append(rest, pf.Netdev.Name)
	}
	cfg := mustParse(b, fmt.Sprintf(`
tags:
  - {name: fabric-a, selectors: {pfNames: [%s, %s]}}
  - {name: dpdk, selectors: {drivers: [vfio-pci]}}
resourceList:
  - {resourceName: low, selectors: {rootDevices: ["%s#0-63,100"]}}
  - {resourceName: fabric, selectors: {tags: [fabric-a], drivers: [iavf]}}
  - {resourceName: netdev, selectors: [{models: [E810-C], drivers: [iavf], pfNames: [%s]}, {vendors: ["15b3"]}]}
  - {resourceName: dpdk, selectors: {tags: [dpdk], vendors: ["8086"], devices: ["1889"]}}
  - {resourceName: ib, selectors: {linkTypes: [infiniband], isRdma: true}}`,
		inv.PFs[0].Netdev.Name, inv.PFs[1].Netdev.Name, inv.PFs[0].Address, strings.Join(rest, ", ")))
	var res *pools.Result
	for b.Loop() {
		res = cfg.Match(inv)
	}
	sizes := []int{}
	for _, p := range res.Pools {
		sizes = append(sizes, len(p.Devices))
	}
	if want := []int{65, 319, 1152, 512, 0}; !slices.Equal(sizes, want) || len(res.Conflicts) != 65 {
		b.Fatalf("pool sizes %v with %d conflicts, want %v with 65", sizes, len(res.Conflicts), want)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2048, "ns/device")
}
