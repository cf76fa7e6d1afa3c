package agent_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/vflayout"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// draConfig serves the vfio-pci VFs through DRA and the iavf VFs through
// a device plugin.
const draConfig = `resourceList:
  - resourceName: sriov_netdevice
    selectors: {vendors: ["8086"], devices: ["1889"], drivers: [iavf]}
  - resourceName: sriov_dpdk
    mode: dra
    selectors: {drivers: [vfio-pci]}
`

// TestAgentDRA: a pool in DRA mode is published in ResourceSlices and not
// registered as a device plugin; a PF link down taints its VFs and the
// link back up removes the taints; switching the pool to devicePlugin
// mode takes its devices out of the slices and registers it.
func TestAgentDRA(t *testing.T) {
	api := kubeapi.Start(t)
	f := newFixture(t, virtualnode.DefaultSpec(), draConfig)
	const node = "dra-node"
	ctx := context.Background()
	f.withDRA(t, api, node)
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	wait := func(what string, cond func(kubeapi.SliceDevices) bool) {
		t.Helper()
		kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, what, cond)
	}
	tainted := func(want int) func(kubeapi.SliceDevices) bool {
		return func(d kubeapi.SliceDevices) bool {
			n := 0
			for _, dev := range d {
				n += len(dev.Taints)
			}
			return len(d) == 4 && n == want
		}
	}
	wait("DRA devices published", tainted(0))
	for _, r := range f.kubelet.Registrations() {
		if r.ResourceName == dpdk {
			t.Errorf("%s registered as a device plugin while in DRA mode", dpdk)
		}
	}
	if err := f.node.SetLinkUp(ctx, "enp59s0f0", false); err != nil {
		t.Fatal(err)
	}
	wait("PF down taints its 2 vfio-pci VFs", tainted(2))
	if err := f.node.SetLinkUp(ctx, "enp59s0f0", true); err != nil {
		t.Fatal(err)
	}
	wait("PF up removes the taints", tainted(0))

	f.writeConfig(t, strings.Replace(draConfig, "mode: dra", "mode: devicePlugin", 1))
	wait("pool leaves DRA", func(d kubeapi.SliceDevices) bool { return len(d) == 0 })
	f.wait(t, dpdk, "registration as a device plugin", func(st testkubelet.State) bool { return len(st.Devices) == 4 })
}

// TestAgentDRAEvictDeadPF: with EvictDeadPF, a PF link down taints its
// VFs NoExecute, so that Kubernetes evicts the pods that hold them; the
// link back up removes the taints.
func TestAgentDRAEvictDeadPF(t *testing.T) {
	api := kubeapi.Start(t)
	f := newFixture(t, virtualnode.DefaultSpec(), draConfig)
	const node = "dra-node"
	ctx := context.Background()
	f.withDRA(t, api, node)
	f.opts.DRA.EvictDeadPF = true
	f.start(t)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	evicting := func(want int) func(kubeapi.SliceDevices) bool {
		return func(d kubeapi.SliceDevices) bool {
			n := 0
			for _, dev := range d {
				for _, taint := range dev.Taints {
					if taint.Effect == resourceapi.DeviceTaintEffectNoExecute && taint.Key == dra.TaintKey {
						n++
					}
				}
			}
			return len(d) == 4 && n == want
		}
	}
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "DRA devices published", evicting(0))
	if err := f.node.SetLinkUp(ctx, "enp59s0f0", false); err != nil {
		t.Fatal(err)
	}
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "PF down taints its 2 vfio-pci VFs NoExecute", evicting(2))
	if err := f.node.SetLinkUp(ctx, "enp59s0f0", true); err != nil {
		t.Fatal(err)
	}
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "PF up removes the taints", func(d kubeapi.SliceDevices) bool {
		for _, dev := range d {
			if len(dev.Taints) > 0 {
				return false
			}
		}
		return len(d) == 4
	})
}

// TestAgentDRARestartWithoutDRAPools: an agent started with no pool in
// DRA mode, after one that had some, withdraws the slices that one left.
// Left published, the scheduler can allocate their devices to a pod
// (extendedResourceName while the device plugin's capacity is briefly
// gone), and prepare refuses them for good.
func TestAgentDRARestartWithoutDRAPools(t *testing.T) {
	api := kubeapi.Start(t)
	f := newFixture(t, virtualnode.DefaultSpec(), draConfig)
	const node = "dra-node"
	f.withDRA(t, api, node)
	f.start(t)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "DRA devices published",
		func(d kubeapi.SliceDevices) bool { return len(d) == 4 })
	f.stop(t)

	f.writeConfig(t, strings.Replace(draConfig, "mode: dra", "mode: devicePlugin", 1))
	f.start(t)
	f.wait(t, dpdk, "registration as a device plugin", func(st testkubelet.State) bool { return len(st.Devices) == 4 })
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "the previous agent's slices withdrawn",
		func(d kubeapi.SliceDevices) bool { return len(d) == 0 })
}

// TestAgentDRAModeWithoutDriver: without --dra, a pool in mode dra is
// served by nothing, not by a device plugin, and the agent says so.
func TestAgentDRAModeWithoutDriver(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), draConfig)
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	f.waitLog(t, "intel.com/sriov_dpdk: mode dra, but the DRA driver is off (--dra): its devices are not served")
	for _, r := range f.kubelet.Registrations() {
		if r.ResourceName == dpdk {
			t.Errorf("%s registered as a device plugin while in DRA mode", dpdk)
		}
	}
}

// TestAgentDRAMetrics: what an operator reads of a DRA pool. Its
// devices published in the ResourceSlices are the pool's capacity, those
// tainted its unhealthy ones, of which those a fence withdraws (here a VF
// layout change an earlier agent left half way, which cannot be undone)
// are its fenced ones, and a claim kubelet prepares holds its device;
// each prepare and unprepare is timed by its result.
func TestAgentDRAMetrics(t *testing.T) {
	api := kubeapi.Start(t)
	f := newFixture(t, virtualnode.DefaultSpec(), draConfig)
	const node = "dra-node"
	f.withDRA(t, api, node)
	f.opts.Metrics = metrics.New()
	const pf = "0000:3e:00.0" // enp62s0f0: VFs 0-5 on iavf, 6-7 on vfio-pci
	leaveFence(t, f.opts.FenceDir, fenceapi.Record{Key: vflayout.FenceKeyPrefix + pf, PF: pf,
		Reason: "its VF layout is changing", Since: time.Now()})
	f.start(t)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "the PF's 2 vfio-pci VFs published fenced", func(d kubeapi.SliceDevices) bool {
		fenced := 0
		for _, dev := range d {
			for _, taint := range dev.Taints {
				if taint.Key == dra.FencedTaintKey {
					fenced++
				}
			}
		}
		return len(d) == 4 && fenced == 2
	})
	scrape := httptest.NewServer(f.opts.Metrics.Handler(false))
	t.Cleanup(scrape.Close)
	waitMetrics := func(lines ...string) {
		t.Helper()
		for _, l := range lines {
			waitHTTP(t, scrape.URL+"/metrics", http.StatusOK, "\n"+l+"\n")
		}
	}
	waitMetrics(
		`hwnet_pool_capacity_devices{resource="intel.com/sriov_dpdk"} 4`,
		`hwnet_pool_allocatable_devices{resource="intel.com/sriov_dpdk"} 2`,
		`hwnet_pool_unhealthy_devices{resource="intel.com/sriov_dpdk"} 2`,
		`hwnet_pool_fenced_devices{resource="intel.com/sriov_dpdk"} 2`,
		`hwnet_pool_held_devices{holder="claim",resource="intel.com/sriov_dpdk"} 0`,
		`hwnet_pool_held_devices{holder="none",resource="intel.com/sriov_dpdk"} 4`,
		// The device plugin pool's VFs of the PF are fenced as well.
		`hwnet_pool_fenced_devices{resource="intel.com/sriov_netdevice"} 6`,
	)

	api.CreateNamespace(t, "ns")
	sock := filepath.Join(f.opts.DRA.PluginDir, "dra.sock")
	sockdir.Await(t, sock, nil)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	kubelet := drapb.NewDRAPluginClient(conn)
	claim := func(name, device string) *drapb.Claim {
		c := api.AllocatedClaim(t, kubeapi.Allocation{Namespace: "ns", Name: name, Class: "hwnet-sriov-dpdk",
			Driver: dra.DefaultDriverName, Pool: node, Devices: []string{device}})
		return &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}
	}
	free, fenced := claim("free", "pci-0000-3b-01-6"), claim("fenced", "pci-0000-3e-01-6")
	for _, tt := range []struct {
		claim   *drapb.Claim
		wantErr string
	}{
		{free, ""},
		{fenced, "device 0000:3e:01.6 is fenced: its VF layout is changing"},
	} {
		resp, err := kubelet.NodePrepareResources(context.Background(), &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{tt.claim}})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.Claims[tt.claim.Uid].GetError(); !strings.Contains(got, tt.wantErr) || (got == "") != (tt.wantErr == "") {
			t.Errorf("prepare of claim %s: %q, want %q", tt.claim.Name, got, tt.wantErr)
		}
	}
	waitMetrics(
		`hwnet_dra_prepare_duration_seconds_count{result="success"} 1`,
		`hwnet_dra_prepare_duration_seconds_count{result="error"} 1`,
		`hwnet_pool_held_devices{holder="claim",resource="intel.com/sriov_dpdk"} 1`,
		`hwnet_pool_held_devices{holder="none",resource="intel.com/sriov_dpdk"} 3`,
	)
	resp, err := kubelet.NodeUnprepareResources(context.Background(), &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{free}})
	if err != nil || resp.Claims[free.Uid].GetError() != "" {
		t.Fatalf("unprepare: %v %v", err, resp)
	}
	waitMetrics(
		`hwnet_dra_unprepare_duration_seconds_count{result="success"} 1`,
		`hwnet_pool_held_devices{holder="claim",resource="intel.com/sriov_dpdk"} 0`,
	)
}

// leaveFence leaves in dir the fence an earlier agent kept on disk.
func leaveFence(t *testing.T, dir string, r fenceapi.Record) {
	t.Helper()
	data, err := fenceapi.Encode(&r)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fenceapi.FileName(r.Key)), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// withDRA has the agent serve its DRA pools for node, a Node object on api,
// with its kubelet sockets and CDI specs in the fixture's directory.
func (f *fixture) withDRA(t testing.TB, api *kubeapi.Server, node string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if _, err := api.Client().CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(f.opts.ConfigFile)
	f.opts.DRA = &agent.DRAOptions{NodeName: node, REST: api.Config(), RegistrarDir: filepath.Join(dir, "reg"),
		PluginDir: filepath.Join(dir, "dra")}
}

// TestAgentModeSwitchKeepsHeldDevices: one owner per device across a
// pool's mode switch. A VF a device plugin pod holds is published tainted
// hwnet.io/held when the pool switches to DRA, until the pod lets it go; a
// VF a prepared claim holds is listed unhealthy to kubelet when the pool
// switches back, until the claim is unprepared.
func TestAgentModeSwitchKeepsHeldDevices(t *testing.T) {
	api := kubeapi.Start(t)
	dpConfig := strings.Replace(draConfig, "mode: dra", "mode: devicePlugin", 1)
	f := newFixture(t, virtualnode.DefaultSpec(), dpConfig)
	const node = "dra-node"
	f.withDRA(t, api, node)
	vfio := vfioVFs(f.node)
	podHeld, claimHeld := vfio[0], vfio[1]
	f.podres.SetPod("default", "cnf", dpdk, podHeld)
	f.start(t)
	f.wait(t, dpdk, "registration as a device plugin", counts(4, 4))

	f.writeConfig(t, draConfig)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	heldOnly := func(id string) func(kubeapi.SliceDevices) bool {
		return func(d kubeapi.SliceDevices) bool {
			for name, dev := range d {
				isHeld := len(dev.Taints) == 1 && dev.Taints[0].Key == dra.HeldTaintKey
				if (name == dra.DeviceName(id)) != isHeld || (name != dra.DeviceName(id) && len(dev.Taints) > 0) {
					return false
				}
			}
			return len(d) == 4
		}
	}
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "the pod's VF published tainted as held", heldOnly(podHeld))
	f.podres.SetPod("default", "cnf", dpdk)
	kubeapi.WaitSliceDevices(t, api.Client(), onNode, react, "the pod's VF free once the pod is gone", heldOnly(""))

	writeClaim(t, dra.CheckpointPath("", f.opts.DRA.PluginDir), claimHeld)
	f.writeConfig(t, dpConfig)
	// While the pool switches front end its devices are fenced, all
	// unhealthy to kubelet: the list to judge is the one after.
	f.wait(t, dpdk, "the claim's VF alone unhealthy to kubelet", func(st testkubelet.State) bool {
		return health(claimHeld, pluginapi.Unhealthy)(st) && st.Healthy() == 3
	})
	writeClaim(t, dra.CheckpointPath("", f.opts.DRA.PluginDir))
	f.wait(t, dpdk, "every VF healthy once the claim is unprepared", counts(4, 4))
}

// vfioVFs are the virtual node's VFs bound to vfio-pci.
func vfioVFs(n *virtualnode.Node) []string {
	var out []string
	for _, fn := range n.Devices() {
		if fn.PF != "" && fn.Driver == "vfio-pci" {
			out = append(out, fn.Addr)
		}
	}
	return out
}

// writeClaim writes the DRA checkpoint with one claim holding the devices,
// or none.
func writeClaim(t *testing.T, path string, devices ...string) {
	t.Helper()
	cp := checkpoint.New()
	if len(devices) > 0 {
		c := &checkpoint.Claim{Namespace: "default", Name: "dpdk", Prepared: time.Now()}
		for _, id := range devices {
			c.Devices = append(c.Devices, checkpoint.Device{Device: dra.DeviceName(id), Resource: dpdk, PCIAddress: id})
		}
		cp.Claims["claim-uid"] = c
	}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAgentTakenProbePortLeavesNothing: a start that fails (here the probe
// port is taken) leaves nothing registered with kubelet: no device plugin
// socket, no plugin registration, no DRA driver socket. Left behind, they
// named pools and a driver no agent serves until the next start.
func TestAgentTakenProbePortLeavesNothing(t *testing.T) {
	api := kubeapi.Start(t)
	f := newFixture(t, virtualnode.DefaultSpec(), draConfig)
	f.withDRA(t, api, "dra-node")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	f.opts.ProbeAddr = taken.Addr().String()
	a, err := agent.New(f.opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := a.Run(ctx); err == nil || !strings.Contains(err.Error(), "probes") {
		t.Fatalf("Run with the probe port taken: %v, want an error naming the probes", err)
	}
	for _, dir := range []string{f.opts.PluginDir, f.opts.DRA.RegistrarDir, f.opts.DRA.PluginDir} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Type()&os.ModeSocket != 0 && e.Name() != filepath.Base(pluginapi.KubeletSocket) {
				t.Errorf("socket %s left in %s after the failed start", e.Name(), dir)
			}
		}
	}
}

// TestAgentReadyWaitsForDRARegistration: with the DRA driver on, /readyz
// says not ready, naming the driver, until kubelet accepts the driver's
// registration; here the test plays kubelet's plugin watcher on the
// registration socket.
func TestAgentReadyWaitsForDRARegistration(t *testing.T) {
	api := kubeapi.Start(t)
	spec := virtualnode.DefaultSpec()
	spec.Name = "draready" // its own netns: other tests' default node may be up
	f := newFixture(t, spec, draConfig)
	f.withDRA(t, api, "dra-node")
	probes := "http://" + freeAddr(t)
	f.opts.ProbeAddr = strings.TrimPrefix(probes, "http://")
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	waitHTTP(t, probes+"/readyz", http.StatusServiceUnavailable, "DRA driver hwnet.io not registered with kubelet")

	sock := filepath.Join(f.opts.DRA.RegistrarDir, dra.DefaultDriverName+"-reg.sock")
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reg := registerapi.NewRegistrationClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), react)
	defer cancel()
	if _, err := reg.GetInfo(ctx, &registerapi.InfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: true}); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, probes+"/readyz", http.StatusOK, "ok")
}
