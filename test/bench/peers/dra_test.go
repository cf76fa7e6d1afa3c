package peers

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
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
	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/kubeclient"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/sockdir"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// draConfig is dpConfig's pool served through the DRA driver instead,
// its claims allowed vfio-pci (issue 44): the node has no VF on it, so
// the pool is the same.
const draConfig = `{"resourceList": [{"resourceName": "bench_vfs", "mode": "dra", "claimDrivers": ["vfio-pci"],
  "selectors": {"vendors": ["8086"], "devices": ["1889"], "drivers": ["iavf", "vfio-pci"]}}]}`

// prepareTrace is how long traceWhile traces: about half of 300 one-device
// calls, each unprepared again.
const prepareTrace = time.Second

// rebindConfig is the opaque configuration of a claim whose VF is bound to
// vfio-pci at prepare.
const rebindConfig = `{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig", "driver": "vfio-pci"}`

// draEnv is the API server the DRA runs share, started on first use:
// the claims live there, and the driver reads them from it as it does on
// a node.
type draEnv struct {
	api        *kubeapi.Server
	kubeconfig string
	// claims reads claims as the agent's DRA library does: the agent's
	// client settings, no client-side rate limit.
	claims kubernetes.Interface
}

func (e *draEnv) start(tb testing.TB) {
	if e.api != nil {
		return
	}
	e.api = kubeapi.Start(tb)
	installAPIs(tb, e.api)
	e.kubeconfig = e.api.WriteKubeconfig(tb, sockdir.New(tb))
	cfg, err := kubeclient.RESTConfig(e.kubeconfig)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.QPS, cfg.RateLimiter = -1, nil
	if e.claims, err = kubernetes.NewForConfig(cfg); err != nil {
		tb.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchNode}}
	if _, err := e.api.Client().CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
}

// stop ends the API server, so that it does not load the parts after.
func (e *draEnv) stop(tb testing.TB) {
	if e.api != nil {
		e.api.Stop(tb)
	}
}

// draRun is one start of hwnet-agent serving its pool through the DRA
// driver, up to the node's ResourceSlices listing every VF.
type draRun struct {
	p      *proc
	client drapb.DRAPluginClient
	conn   *grpc.ClientConn
	// reg is the driver's registration service, on a gRPC server the DRA
	// library runs in the same process as the plugin's.
	reg     registerapi.RegistrationClient
	regConn *grpc.ClientConn
	devices []string
	// metrics is the agent's metrics URL, served under -profile-dir only.
	metrics string
}

// startDRA starts hwnet-agent with its pool in DRA mode as the DaemonSet
// runs it (--dra), on the node's tree and netns, and waits for its
// ResourceSlices to list every VF. It records that time.
func (e *draEnv) startDRA(tb testing.TB, t *table, node *virtualnode.Node, bins string, vfs int) *draRun {
	tb.Helper()
	e.start(tb)
	// The last round's agent left its slices, as a stopped agent does;
	// kubelet deletes a node's slices when it starts, and so does this.
	err := e.api.Client().ResourceV1().ResourceSlices().DeleteCollection(context.Background(), metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "spec.nodeName=" + benchNode})
	if err != nil {
		tb.Fatal(err)
	}
	dir := sockdir.New(tb)
	config, err := writeFile(dir, "pools.json", draConfig)
	if err != nil {
		tb.Fatal(err)
	}
	k, err := testkubelet.Start(filepath.Join(dir, "dp"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(k.Close)
	servePodResources(tb, filepath.Join(dir, "pr.sock"))
	// kubelet's plugins directory exists before any driver starts: one
	// missing is a source of holders the agent cannot read, and it waits.
	plugins := mkdir(tb, filepath.Join(dir, "plugins"))
	plugin := filepath.Join(plugins, dra.DefaultDriverName)
	metricsAddr := ""
	if *profiles != "" {
		metricsAddr = freeAddr(tb)
	}
	args := append(asDeployed(tb, filepath.Join(bins, "hwnet-agent")), "--cni=false", "--dra", "--config-file", config,
		"--sysfs", node.SysRoot(), "--dev", node.DevRoot(), "--netns", "/run/netns/"+node.NetnsName(),
		"--node-name", benchNode, "--kubeconfig", e.kubeconfig, "--last-good-config", "",
		"--device-plugin-dir", k.Dir, "--pod-resources-socket", filepath.Join(dir, "pr.sock"),
		"--devinfo-dir", filepath.Join(dir, "devinfo"), "--metrics-addr", metricsAddr, "--probe-addr", "",
		"--dra-plugin-dir", plugin, "--dra-plugins-dir", plugins, "--dra-registrar-dir", filepath.Join(dir, "registry"), "--cdi-dir", filepath.Join(dir, "cdi"))
	if metricsAddr != "" {
		args = append(args, "--pprof")
	}
	// Device-info files and CDI specs go where a node keeps them, under
	// /run, a tmpfs; the checkpoint stays on the disk, as kubelet's
	// plugins directory is.
	runDirs := []mount{{"", filepath.Join(dir, "devinfo")}, {"", filepath.Join(dir, "cdi")}}
	p := startIn(tb, nil, "hwnet-agent-dra", runDirs, args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctx, cancelAlive := p.alive(ctx)
	defer cancelAlive()
	devices, err := e.waitSlices(ctx, vfs)
	if err != nil {
		tb.Fatalf("hwnet-agent --dra with %d VFs: %v\nlog:\n%s", vfs, err, p.tail())
	}
	t.add(fmt.Sprintf("start to ResourceSlices of every VF (DRA) at %d VFs", vfs), "ms", "hwnet", ms(time.Since(p.started)))
	// Before any prepare: what the start and the publishing alone cost,
	// the publishing's garbage not yet collected.
	rss, _ := p.rssMB()
	t.add(fmt.Sprintf("RSS with the slices published (DRA) at %d VFs", vfs), "MiB", "hwnet", rss)
	addRSSSplit(t, p, "hwnet", "with the slices published (DRA)")
	// The slices may come before the plugin socket: kubelet calls a
	// driver only once it registered, which it does after serving it.
	socket := filepath.Join(plugin, "dra.sock")
	if err := waitSocket(ctx, socket); err != nil {
		tb.Fatalf("hwnet-agent --dra: %v\nlog:\n%s", err, p.tail())
	}
	regSocket := filepath.Join(dir, "registry", dra.DefaultDriverName+"-reg.sock")
	if err := waitSocket(ctx, regSocket); err != nil {
		tb.Fatalf("hwnet-agent --dra: %v\nlog:\n%s", err, p.tail())
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	regConn, err := grpc.NewClient("unix://"+regSocket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		conn.Close()
		tb.Fatal(err)
	}
	run := &draRun{p: p, client: drapb.NewDRAPluginClient(conn), conn: conn,
		reg: registerapi.NewRegistrationClient(regConn), regConn: regConn, devices: devices}
	if metricsAddr != "" {
		run.metrics = "http://" + metricsAddr + "/metrics"
	}
	return run
}

// waitSocket waits for a unix socket to be there.
func waitSocket(ctx context.Context, path string) error {
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no socket %s: %w", path, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitSlices polls the node's ResourceSlices until they list want
// devices of hwnet's driver, and returns their names.
func (e *draEnv) waitSlices(ctx context.Context, want int) ([]string, error) {
	slices := e.api.Client().ResourceV1().ResourceSlices()
	for {
		list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + benchNode})
		var names []string
		if err == nil {
			for _, s := range list.Items {
				for _, d := range s.Spec.Devices {
					if s.Spec.Driver == dra.DefaultDriverName {
						names = append(names, d.Name)
					}
				}
			}
		}
		if len(names) == want {
			return names, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d devices in ResourceSlices (%v): %w", len(names), want, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// draClaims is how many claims of each size the calls take turns with:
// each is unprepared before it is prepared again, as a new one would be.
const draClaims = 50

// prepare times calls NodePrepareResources calls over the driver's gRPC
// socket, as kubelet makes them, each for a claim of size devices
// allocated on the API server; each is unprepared again, untimed. It
// records their p50 and p99.
func (r *draRun) prepare(tb testing.TB, t *table, e *draEnv, size, calls int) {
	tb.Helper()
	r.timePrepares(tb, t, e, size, calls, "", fmt.Sprintf("%d device(s)", size))
}

// prepareRebound is prepare for claims of one VF bound to vfio-pci at
// prepare and back to iavf at unprepare (issue 44), with the node's
// kernel emulation enacting the writes as the kernel would, for a tenth
// of calls.
func (r *draRun) prepareRebound(tb testing.TB, t *table, e *draEnv, node *virtualnode.Node, calls int) {
	tb.Helper()
	// The bench node's VFs are all on iavf: vfio-pci is loaded as
	// modprobe would, for the agent to find it.
	if err := node.LoadDriver("vfio-pci"); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- node.EnactWrites(ctx, slog.New(slog.DiscardHandler), func() { close(ready) }) }()
	defer func() { cancel(); <-done }()
	select {
	case <-ready:
	case err := <-done:
		tb.Fatalf("kernel emulation: %v", err)
	}
	// A tenth of the calls: each is two rebinds, and each rebind's
	// uevents make the agent discover the 2048-VF node again.
	r.timePrepares(tb, t, e, 1, max(calls/10, 10), rebindConfig, "1 device rebound to vfio-pci")
}

// claims allocates n claims of size devices each, from devices, with the
// opaque config, on the API server.
func (r *draRun) claims(tb testing.TB, e *draEnv, devices []string, n, size int, config, prefix string) []*resourceapi.ResourceClaim {
	tb.Helper()
	claims := make([]*resourceapi.ResourceClaim, 0, n)
	for i := 0; i+size <= len(devices) && len(claims) < n; i += size {
		name := fmt.Sprintf("%s%d-%d-%d-%t", prefix, r.p.cmd.Process.Pid, size, i, config != "")
		claims = append(claims, e.api.AllocatedClaim(tb, kubeapi.Allocation{Namespace: "default", Name: name,
			Class: "hwnet-bench-vfs", Driver: dra.DefaultDriverName, Pool: benchNode, Devices: devices[i : i+size], Config: config}))
	}
	return claims
}

// prepareBeside is prepare with held claims of heldSize devices prepared
// beforehand and kept prepared through the calls, as on a node whose
// pods hold them: what each call costs grows with what the node holds
// if the driver's work does. The held claims take the last devices,
// which the calls' claims never reach.
func (r *draRun) prepareBeside(tb testing.TB, t *table, e *draEnv, held, calls int) {
	tb.Helper()
	from := len(r.devices) - held*heldSize
	if from < draClaims {
		tb.Fatalf("%d held claims of %d devices leave %d of %d devices for the calls", held, heldSize, from, len(r.devices))
	}
	holds := r.claims(tb, e, r.devices[from:], held, heldSize, "", "h")
	for _, c := range holds {
		if err := r.call(c, true); err != nil {
			tb.Fatalf("%s: %v\nlog:\n%s", r.p.name, err, r.p.tail())
		}
	}
	r.timePrepares(tb, t, e, 1, calls, "", fmt.Sprintf("1 device, %d claims of %d held", held, heldSize))
	for _, c := range holds {
		if err := r.call(c, false); err != nil {
			tb.Fatalf("%s: %v\nlog:\n%s", r.p.name, err, r.p.tail())
		}
	}
}

// heldSize is the devices of each claim prepareBeside holds: a CNF pod
// of the cluster bench has four VF networks.
const heldSize = 4

// timePrepares times calls NodePrepareResources of claims of size
// devices with the opaque config, and records them as what.
func (r *draRun) timePrepares(tb testing.TB, t *table, e *draEnv, size, calls int, config, what string) {
	tb.Helper()
	// Named by what: each set of calls has claims of its own.
	claims := r.claims(tb, e, r.devices, draClaims, size, config, fmt.Sprintf("c%x-", crc32.ChecksumIEEE([]byte(what))))
	stopTrace := r.traceWhile(tb, what)
	// beyond is each call less the read of its claim right after it: the
	// driver's share of that call, with the API server's speed of the
	// moment (which drifts over a run) taken out.
	lat, get, beyond := make(samples, 0, calls), make(samples, 0, calls), make(samples, 0, calls)
	cpu := r.p.cpu()
	for i := range calls {
		c := claims[i%len(claims)]
		took, err := r.prepareOnce(c)
		if err != nil {
			tb.Fatalf("%s: %v\nlog:\n%s", r.p.name, err, r.p.tail())
		}
		lat = append(lat, ms(took))
		if took, err = claimRead(e.claims, c); err != nil {
			tb.Fatal(err)
		}
		get = append(get, ms(took))
		beyond = append(beyond, lat[i]-get[i])
	}
	cpu = r.p.cpu() - cpu
	stopTrace()
	empty := r.emptyCalls(tb, e, claims, calls)
	t.add("NodePrepareResources p50, "+what, "ms", "hwnet", lat.pct(50))
	t.add("NodePrepareResources p99, "+what, "ms", "hwnet", lat.pct(99))
	t.add("the claim's read alone p50, "+what, "ms", "hwnet", get.pct(50))
	t.add("NodePrepareResources less the claim's read after it, p50, "+what, "ms", "hwnet", beyond.pct(50))
	t.add("a call that does nothing (the registration's GetInfo) p50, "+what, "ms", "hwnet", empty.pct(50))
	t.add("NodePrepareResources less the read and that call (p50s), "+what, "ms", "hwnet", beyond.pct(50)-empty.pct(50))
	// All the agent did meanwhile, beside the calls too (its ledger, its
	// judgements of every device), shares the node's CPUs with the API
	// server the calls wait for.
	t.add("agent CPU per prepare and its unprepare, "+what, "ms", "hwnet", ms(cpu)/float64(calls))
}

// claimRead times the read of the claim the DRA library makes before the
// driver prepares it (a quorum GET): the API server's share of a call,
// taken between the calls, on the same server and load.
func claimRead(client kubernetes.Interface, c *resourceapi.ResourceClaim) (time.Duration, error) {
	start := time.Now()
	_, err := client.ResourceV1().ResourceClaims(c.Namespace).Get(context.Background(), c.Name, metav1.GetOptions{})
	return time.Since(start), err
}

// emptyCalls times calls of the driver's registration GetInfo: a unary
// call on a gRPC server the DRA library runs in the agent as it runs the
// plugin's, through the same interceptors, with no work behind it (the
// transport's share of a call, which kubelet pays too). Each follows a
// read of a claim, as a prepare follows the last one's: the API server
// then still shares the CPUs. They come after the prepares, whose CPU
// they would add to.
func (r *draRun) emptyCalls(tb testing.TB, e *draEnv, claims []*resourceapi.ResourceClaim, calls int) samples {
	tb.Helper()
	took := make(samples, 0, calls)
	for i := range calls {
		if _, err := claimRead(e.claims, claims[i%len(claims)]); err != nil {
			tb.Fatal(err)
		}
		start := time.Now()
		if _, err := r.reg.GetInfo(context.Background(), &registerapi.InfoRequest{}); err != nil {
			tb.Fatal(err)
		}
		took = append(took, ms(time.Since(start)))
	}
	return took
}

// traceWhile saves, under -profile-dir, an execution trace, a CPU
// profile and the allocations of the agent over the first prepareTrace
// of the calls that follow, as what: where a call's time goes in the
// whole process, what else the agent does beside the calls, the
// functions of that CPU (which the trace's stacks at each block only
// group) and the garbage the calls leave. The returned func waits for
// the three.
func (r *draRun) traceWhile(tb testing.TB, what string) func() {
	if r.metrics == "" {
		return func() {}
	}
	name := "hwnet-dra-prepares-" + strings.ReplaceAll(what, " ", "-")
	profiles := []struct{ endpoint, suffix string }{{"trace", ".trace"}, {"profile", ".cpu.pprof"}, {"allocs", ".allocs.pprof"}}
	done := make(chan error, len(profiles))
	for _, p := range profiles {
		go func() {
			done <- fetchProfile(r.metrics, fmt.Sprintf("%s?seconds=%d", p.endpoint, int(prepareTrace.Seconds())), name+p.suffix)
		}()
	}
	return func() {
		for range profiles {
			if err := <-done; err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// prepareOnce prepares the claim, then unprepares it, and returns how
// long NodePrepareResources took.
func (r *draRun) prepareOnce(c *resourceapi.ResourceClaim) (time.Duration, error) {
	start := time.Now()
	if err := r.call(c, true); err != nil {
		return 0, err
	}
	took := time.Since(start)
	return took, r.call(c, false)
}

// call prepares the claim, or unprepares it, as kubelet asks.
func (r *draRun) call(c *resourceapi.ResourceClaim, prepare bool) error {
	ctx := context.Background()
	claims := []*drapb.Claim{{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)}}
	op, msg, err := "NodeUnprepareResources", "", error(nil)
	if prepare {
		op = "NodePrepareResources"
		resp, perr := r.client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: claims})
		msg, err = resp.GetClaims()[string(c.UID)].GetError(), perr
	} else {
		resp, uerr := r.client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: claims})
		msg, err = resp.GetClaims()[string(c.UID)].GetError(), uerr
	}
	if err == nil {
		err = claimError(msg)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, c.Name, err)
	}
	return nil
}

func claimError(msg string) error {
	if msg == "" {
		return nil
	}
	return fmt.Errorf("%s", msg)
}

func (r *draRun) stop() {
	r.conn.Close()
	r.regConn.Close()
	r.p.stop()
}
