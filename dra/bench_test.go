package dra_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/hwnet-io/hwnet/dra"
)

// BenchmarkPrepare measures a claim's prepare and unprepare as kubelet
// asks for them, for 1 and 4 vfio-pci VFs: device-info files, the CDI
// spec and two checkpoint writes each. It reports the p50 and p99 of
// prepare alone.
func BenchmarkPrepare(b *testing.B) {
	n := newTestNode(b)
	for _, count := range []int{1, 4} {
		b.Run(fmt.Sprintf("devices=%d", count), func(b *testing.B) {
			p := newPreparer(b, n, b.TempDir())
			if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
				b.Fatal(err)
			}
			vfs := []string{"pci-0000-3b-01-6", "pci-0000-3b-01-7", "pci-0000-3e-01-6", "pci-0000-3e-01-7"}[:count]
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				took = append(took, prepareOnce(b, p, fmt.Sprintf("uid-%d", i), vfs))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-us")
		})
	}
}

// prepareOnce prepares and unprepares one claim, returning how long the
// prepare took.
func prepareOnce(b *testing.B, p *preparer, uid string, vfs []string) time.Duration {
	results := make([]resourceapi.DeviceRequestAllocationResult, len(vfs))
	for i, vf := range vfs {
		results[i] = alloc("vfs", vf)
	}
	c := claim(uid, results...)
	ctx := context.Background()
	start := time.Now()
	res, err := p.drv.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
	took := time.Since(start)
	if err != nil || res[c.UID].Err != nil {
		b.Fatal(err, res[c.UID].Err)
	}
	obj := kubeletplugin.NamespacedObject{UID: types.UID(uid)}
	if _, err := p.drv.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{obj}); err != nil {
		b.Fatal(err)
	}
	return took
}
