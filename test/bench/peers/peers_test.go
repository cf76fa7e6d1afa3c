package peers

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/e2e/image"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

var (
	binDir     = flag.String("hwnet-bin", "", "directory with hwnet-agent and hwnet as shipped (default: go build them, as the image does)")
	sriovdp    = flag.String("sriovdp", "", "the SR-IOV network device plugin binary (empty: absent)")
	multusDir  = flag.String("multus", "", "directory with Multus's multus, multus-shim and multus-daemon (empty: absent)")
	rounds     = flag.Int("rounds", 3, "interleaved rounds of every measurement")
	sizes      = flag.String("sizes", "128,512,2048", "VFs of the nodes the device plugins start on")
	idleFor    = flag.Duration("idle", 10*time.Second, "how long idle CPU is measured, per daemon and round")
	settleFor  = flag.Duration("idle-settle", 30*time.Second, "how long a daemon is left after its last request before its idle CPU is measured; the CPU it uses meanwhile is a row of its own")
	calls      = flag.Int("allocs", 300, "Allocate calls per round and size")
	heldClaims = flag.Int("held-claims", 100, "DRA: claims of 4 devices held prepared while 1-device prepares are timed once more (0: not)")
	pods       = flag.Int("pods", 20, "pods per tool, round and network count in the CNI part")
	parts      = flag.String("parts", "dp,dra,cni", "parts to run: dp (device plugins), dra (hwnet's DRA driver at the largest size), cni")
	agentEnv   = flag.String("agent-env", "", "comma-separated NAME=VALUE given to hwnet-agent after deploy/hwnet-agent.yaml's Go settings (e.g. GOGC=25)")
	agentArgs  = flag.String("agent-args", "", "comma-separated flags given to hwnet-agent before the benchmark's own (e.g. --pace-gc=false)")
	profiles   = flag.String("profile-dir", "", "save hwnet-agent's heap and goroutine profiles and smaps there with 100 pods attached, its smaps after the DRA prepares and its heap, memory statistics and smaps at rest after them, a trace, CPU profile and allocations of each set of DRA prepares, each device plugin's smaps when idle, and an idle trace and allocation profile (serves --pprof)")
)

// BenchmarkPeers runs every measurement once (use -benchtime 1x) and
// prints the table.
func BenchmarkPeers(b *testing.B) {
	vnodetest.RequireRoot(b)
	for b.Loop() {
		t := &table{tools: []string{"hwnet"}}
		bins := hwnetBinaries(b)
		dps := []dpTool{{"hwnet", func(config string) []string {
			return append(asDeployed(b, filepath.Join(bins, "hwnet-agent")), "--cni=false", "--config-file", config)
		}}}
		if *sriovdp != "" {
			t.tools = append(t.tools, "sriovdp")
			dps = append(dps, dpTool{"sriovdp", func(config string) []string {
				return []string{*sriovdp, "--config-file", config, "-logtostderr"}
			}})
		} else if strings.Contains(*parts, "dp") {
			t.note("sriovdp: absent (-sriovdp not given); hwnet-agent measured alone.")
		}
		if !strings.Contains(*parts, "dp") {
			dps = nil
		}
		if dps != nil || strings.Contains(*parts, "dra") {
			benchDevicePlugins(b, t, dps, bins)
		}
		if strings.Contains(*parts, "cni") {
			if *multusDir != "" {
				t.tools = append(t.tools, "multus-thin", "multus-thick")
			}
			benchCNI(b, t, bins)
		}
		t.note("machine: %d CPUs, %s, kernel %s; load average (1 min) %s at the end; %s",
			runtime.NumCPU(), cpuModel(), kernel(), strconv.FormatFloat(loadavg(), 'f', 2, 64), time.Now().UTC().Format(time.RFC3339))
		fmt.Println()
		t.print(os.Stdout)
	}
}

// benchDevicePlugins starts each device plugin on nodes of each size, in
// rounds whose order rotates, so that load drifts touch every tool alike.
// With the dra part, each round at the largest size also starts
// hwnet-agent serving the pool through its DRA driver.
func benchDevicePlugins(b *testing.B, t *table, tools []dpTool, bins string) {
	var vfsList []int
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 8 || n%8 != 0 {
			b.Fatalf("-sizes: %q is not a multiple of 8", f)
		}
		vfsList = append(vfsList, n)
	}
	largest := vfsList[len(vfsList)-1]
	withDRA := strings.Contains(*parts, "dra")
	if tools == nil {
		vfsList = []int{largest}
	}
	de := &draEnv{}
	defer de.stop(b)
	for _, vfs := range vfsList {
		node := dpNode(b, vfs)
		for round := range *rounds {
			for i := range tools {
				tool := tools[(i+round)%len(tools)]
				run := startDP(b, t, node, tool, vfs)
				if vfs == largest {
					run.allocate(b, t, 1, *calls)
					run.allocate(b, t, 4, *calls)
					// Right after the burst, as the DRA mode's row
					// after the prepares is taken.
					rss, _ := run.p.rssMB()
					t.add(fmt.Sprintf("RSS right after the Allocates at %d VFs", vfs), "MiB", run.p.name, rss)
					run.idle(t, *settleFor, *idleFor, vfs)
					if *profiles != "" {
						saveSmaps(b, run.p.cmd.Process.Pid, run.p.name+"-dp-smaps-idle.txt")
					}
				}
				run.stop()
			}
			if withDRA && vfs == largest {
				run := de.startDRA(b, t, node, bins, vfs)
				run.prepare(b, t, de, 1, *calls)
				run.prepare(b, t, de, 4, *calls)
				// Before the rebinds: each makes the agent discover the
				// node again, which the device plugins' figure never has.
				rss, _ := run.p.rssMB()
				t.add(fmt.Sprintf("RSS after the prepares (DRA) at %d VFs", vfs), "MiB", "hwnet", rss)
				addRSSSplit(t, run.p, "hwnet", "after the prepares (DRA)")
				if run.metrics != "" {
					saveSmaps(b, run.p.cmd.Process.Pid, "hwnet-dra-smaps-prepared.txt")
				}
				// At rest as the device plugin mode's idle rows are
				// taken: the same settling and window after the
				// last request, which is what the two modes' memory
				// compares on a node between pod starts.
				atRest(t, run.p, "hwnet", *settleFor, *idleFor, fmt.Sprintf("after the prepares (DRA), at %d VFs", vfs), fmt.Sprintf("after the prepares (DRA) at %d VFs", vfs))
				// Last: a profile's symbols are read from the binary's
				// function tables, pages the rows above must not count.
				if run.metrics != "" {
					saveSmaps(b, run.p.cmd.Process.Pid, "hwnet-dra-smaps-idle.txt")
					saveProfile(b, run.metrics, "heap", "hwnet-dra-heap-idle.pb.gz")
					saveProfile(b, run.metrics, "heap?debug=1", "hwnet-dra-memstats-idle.txt")
				}
				// After the rows at rest, which compare with the
				// device plugin mode's.
				if *heldClaims > 0 {
					run.prepareBeside(b, t, de, *heldClaims, *calls)
				}
				run.prepareRebound(b, t, de, node, *calls)
				rss, _ = run.p.rssMB()
				t.add(fmt.Sprintf("RSS after the rebinding prepares (DRA) at %d VFs", vfs), "MiB", "hwnet", rss)
				run.stop()
			}
		}
		if err := node.Destroy(); err != nil {
			b.Fatal(err)
		}
	}
	t.note("Device plugins: %d rounds, order rotating; each node has 8 E810-C PFs sharing the VFs (iavf), real veth links; one pool of every VF; a fresh kubelet stand-in (test/testkubelet) per start; both run inside the node (its /sys, its netns). Allocate over gRPC, %d calls per round at %d VFs, device-info files on tmpfs; kubelet's PodResources lists each call's pod until a later call takes one of its devices. Idle CPU over %v, from %v after the Allocates (their pods running); the CPU of those %[5]v is the settling row.",
		*rounds, *calls, largest, *idleFor, *settleFor)
	if withDRA {
		t.note("DRA: each round at %d VFs, after the device plugins, hwnet-agent --dra with the same pool in mode dra, on the node's sysfs and netns, against a real kube-apiserver (test/kubeapi); NodePrepareResources over the driver's gRPC socket as kubelet calls it, %d calls per size taking turns over %d claims allocated on the API server (the driver GETs each), each unprepared again untimed; device-info files and CDI specs on tmpfs as under a node's /run, the checkpoint on the test's disk as in kubelet's plugins directory.",
			largest, *calls, draClaims)
	}
}

// hwnetBinaries returns the directory of hwnet's binaries, building them
// as the image does when -hwnet-bin is not given.
func hwnetBinaries(b *testing.B) string {
	if *binDir != "" {
		return *binDir
	}
	dir := b.TempDir()
	cmd := exec.Command("go", "build", "-trimpath", "-tags", image.BuildTags, "-o", dir+"/", "github.com/hwnet-io/hwnet/cmd/hwnet-agent", "github.com/hwnet-io/hwnet/cmd/hwnet")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	// Written back, as a node's image is long before its agent starts.
	// The agent writes back a binary that is not before it releases its
	// start-up pages (internal/startup), so the first starts after the
	// build would have their RSS rows taken before the release.
	for _, name := range []string{"hwnet-agent", "hwnet"} {
		if err := syncFile(filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func cpuModel() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func kernel() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}
