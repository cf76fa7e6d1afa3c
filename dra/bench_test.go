package dra_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/sockdir"
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

// BenchmarkNodePrepare measures NodePrepareResources as kubelet calls it,
// over the driver's gRPC socket, for a claim of 1 and of 4 vfio-pci VFs
// allocated on a real kube-apiserver: the library's GET of the claim,
// then the driver's prepare. Each iteration unprepares the claim again
// (not timed). It reports the p50 and p99 of NodePrepareResources.
func BenchmarkNodePrepare(b *testing.B) {
	api := kubeapi.Start(b)
	n := newTestNode(b)
	ctx := context.Background()
	if _, err := api.Client().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	api.CreateNamespace(b, "ns")
	dir := sockdir.New(b)
	drv, err := dra.Start(ctx, dra.Options{NodeName: nodeName, KubeClient: api.Client(), Metadata: metadata.NewForConfigOrDie(api.Config()),
		PluginDir: filepath.Join(dir, "plugin"), RegistrarDir: filepath.Join(dir, "registry"), CDIDir: filepath.Join(dir, "cdi"),
		DevinfoDir: filepath.Join(dir, "devinfo"), DevRoot: n.node.DevRoot(), SysfsRoot: n.node.SysRoot(),
		Ledger: openLedger(b, ledger.Sources{Checkpoint: dra.CheckpointPath("", filepath.Join(dir, "plugin"))}, n.node.SysRoot())})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(drv.Stop)
	if err := drv.Publish(ctx, dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		b.Fatal(err)
	}
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "plugin", "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	client := drapb.NewDRAPluginClient(conn)
	vfs := []string{"pci-0000-3b-01-6", "pci-0000-3b-01-7", "pci-0000-3e-01-6", "pci-0000-3e-01-7"}
	// Each run has claims of its own: -count runs a size again on the
	// same API server.
	runs := 0
	for _, count := range []int{1, 4} {
		b.Run(fmt.Sprintf("devices=%d", count), func(b *testing.B) {
			runs++
			c := api.AllocatedClaim(b, kubeapi.Allocation{Namespace: "ns", Name: fmt.Sprintf("claim-%d-%d", count, runs),
				Class: "hwnet-sriov-dpdk", Driver: dra.DefaultDriverName, Pool: nodeName, Devices: vfs[:count]})
			var took []time.Duration
			for b.Loop() {
				took = append(took, nodePrepareOnce(b, client, c))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-us")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-us")
		})
	}
}

// nodePrepareOnce prepares and unprepares the claim over gRPC, returning
// how long NodePrepareResources took.
func nodePrepareOnce(b testing.TB, client drapb.DRAPluginClient, c *resourceapi.ResourceClaim) time.Duration {
	ctx := context.Background()
	claims := []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}
	start := time.Now()
	resp, err := client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claims})
	took := time.Since(start)
	if err != nil || resp.Claims[string(c.UID)].GetError() != "" {
		b.Fatal(err, resp.Claims[string(c.UID)].GetError())
	}
	if _, err := client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims}); err != nil {
		b.Fatal(err)
	}
	return took
}
