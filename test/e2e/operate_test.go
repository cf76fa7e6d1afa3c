package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

const (
	chartDir     = "deploy/helm/hwnet"
	uninstallDS  = "deploy/uninstall/hwnet-uninstall.yaml"
	metricsPort  = 8142
	nextAgentRef = "hwnet:next"
)

// helmBinary is Helm from $HWNET_HELM, PATH or `make helm`'s directory;
// the test skips without it unless the CI requires every test.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HWNET_HELM"); p != "" {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if _, err := os.Stat("/var/cache/hwnet-ci/tools/helm"); err == nil {
		return "/var/cache/hwnet-ci/tools/helm"
	}
	vnodetest.Unavailable(t, "helm not found: `make helm` builds it")
	return ""
}

// restoreHwnet deploys hwnet from deploy/ again once the test is over, for
// the tests after it.
func (e *env) restoreHwnet(t *testing.T) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "delete", "daemonset", "hwnet-uninstall", "--ignore-not-found", "--wait")
		if _, err := DeployHwnet(ctx, e.c, e.repo, testWriter{t}); err != nil {
			t.Errorf("hwnet not deployed again after the test: %v", err)
		}
	})
}

// agentPod is the ready hwnet-agent pod of the node.
func (e *env) agentPod(ctx context.Context) (*corev1.Pod, error) {
	name, err := runningAgent(ctx, e.client, e.c.NodeName())
	if err != nil {
		return nil, err
	}
	return e.client.CoreV1().Pods(AgentNamespace).Get(ctx, name, metav1.GetOptions{})
}

// TestHelmRollingUpgrade: hwnet installed from the Helm chart with metrics
// on, rolled to a new image tag (built by `make image`'s builder) while a
// pod with an SR-IOV attachment runs: the pod keeps its VF, a pod started
// after the roll shows in the ADD histogram, readiness goes false while
// the CNI socket is gone, and deleting the pods leaks nothing.
func TestHelmRollingUpgrade(t *testing.T) {
	e := setup(t)
	helm := helmBinary(t)
	ctx := testContext(t)
	e.restoreHwnet(t)
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("across-upgrade", `[{"name": "sriov-net", "ips": ["10.56.4.1/24"]}]`, map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name, "after-upgrade")
	pid, linksBefore, held := e.runHolding(ctx, t, pod)

	tarball, err := image.Release(ctx, e.repo, cluster.TestImageDir(), nextAgentRef)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.ImportImage(ctx, tarball); err != nil {
		t.Fatal(err)
	}
	repo, tag, _ := strings.Cut(nextAgentRef, ":")
	out, err := exec.CommandContext(ctx, helm, "template", "hwnet", filepath.Join(e.repo, chartDir), "--namespace", AgentNamespace,
		"--set", "image.repository="+repo, "--set", "image.tag="+tag, "--set", "metrics.enabled=true",
		"--set", fmt.Sprintf("metrics.port=%d", metricsPort), "--set-file", "pools="+filepath.Join(e.repo, PoolsFile),
		// hwnet-controller's pods, on the pod network, would roll too: their
		// sandboxes would count as this test's ADDs and node changes.
		"--set", "controller.enabled=false").Output()
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	if _, err := Kubectl(ctx, e.c, out, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	e.waitAgentRolled(ctx, t, nextAgentRef)
	if got := podLinks(t, pid)["net1"]; !slices.Equal(got.Addrs, linksBefore["net1"].Addrs) || got.MAC != linksBefore["net1"].MAC {
		t.Errorf("pod's net1 after the upgrade = %+v, want as before %+v", got, linksBefore["net1"])
	}
	if got := e.mustSnapshot(ctx, t).Allocated; !slices.Equal(got, held) {
		t.Errorf("allocated devices after the upgrade %v, want as before %v", got, held)
	}
	if _, err := e.runPod(ctx, workloadPod("after-upgrade", "", nil), 0); err != nil {
		t.Fatal(err)
	}
	e.waitMetric(ctx, t, `hwnet_cni_request_duration_seconds_count{command="ADD",result="success"} 1`)
	e.waitMetric(ctx, t, `hwnet_pool_allocatable_devices{resource="intel.com/sriov_netdevice"}`)
	e.waitMetric(ctx, t, `hwnet_build_info{`)
	// The figures the manifests' requests and limits come from.
	t.Logf("agent after the roll and one pod: %s, %s", e.waitMetric(ctx, t, "process_resident_memory_bytes"),
		e.waitMetric(ctx, t, "process_cpu_seconds_total"))

	if _, err := Exec(ctx, e.c, nil, "rm", "/run/hwnet/cni.sock"); err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, podTimeout, "hwnet-agent not ready without its CNI socket", func(ctx context.Context) error {
		if _, err := runningAgent(ctx, e.client, e.c.NodeName()); err == nil {
			return fmt.Errorf("the agent is still ready")
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name, "after-upgrade")
}

// waitAgentRolled waits until the node's ready agent runs image ref and
// hwnet is ready again with every pool.
func (e *env) waitAgentRolled(ctx context.Context, t *testing.T, ref string) {
	t.Helper()
	err := cluster.Poll(ctx, podTimeout, "hwnet-agent rolled to "+ref, func(ctx context.Context) error {
		p, err := e.agentPod(ctx)
		if err == nil && p.Spec.Containers[0].Image != ref {
			err = fmt.Errorf("agent %s runs %s", p.Name, p.Spec.Containers[0].Image)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := WaitHwnetReady(ctx, e.c, e.pools, testWriter{t}); err != nil {
		t.Fatal(err)
	}
}

// waitMetric waits until the agent's /metrics has a line starting with
// want (a full sample, or a metric name and labels) and returns it.
func (e *env) waitMetric(ctx context.Context, t *testing.T, want string) string {
	t.Helper()
	url := fmt.Sprintf("http://%s:%d/metrics", e.c.NodeIP(), metricsPort)
	var last, found string
	err := cluster.Poll(ctx, podTimeout, "/metrics with "+want, func(ctx context.Context) error {
		out, err := Exec(ctx, e.c, nil, "curl", "-sf", url)
		if err != nil {
			return err
		}
		last = string(out)
		for _, line := range strings.Split(last, "\n") {
			if strings.HasPrefix(line, want) {
				found = line
				return nil
			}
		}
		return fmt.Errorf("not there")
	})
	if err != nil {
		t.Errorf("%v; /metrics:\n%.3000s", err, last)
	}
	return found
}

// TestUninstallLeavesDefaultNetwork: the documented uninstall path
// (docs/operations.md) leaves no hwnet file on the node, and a new pod
// then starts on the default network alone, without waiting for an agent.
// hwnet installed again over that running pod, as on any node whose pods
// predate it, and over one it attached on the default network before the
// uninstall (whose record went with it), tears both down when they go:
// their DEL comes through hwnet, which keeps no record of them, and their
// default network leases and the runtime's cache entries go all the same.
func TestUninstallLeavesDefaultNetwork(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	e.restoreHwnet(t)
	before, err := e.attachmentFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	through := workloadPod("through-hwnet", "", nil)
	e.cleanupPods(t, through.Name)
	if _, err := e.runPod(ctx, through, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "delete", "daemonset", "hwnet-agent", "--wait"); err != nil {
		t.Fatal(err)
	}
	err = cluster.Poll(ctx, podTimeout, "hwnet-agent pods gone", func(ctx context.Context) error {
		pods, err := e.client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
		if err == nil && len(pods.Items) > 0 {
			err = fmt.Errorf("%d left", len(pods.Items))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Exec(ctx, e.c, nil, "test", "-e", ConfFile); err != nil {
		t.Fatalf("deleting the agent alone removed hwnet's CNI configuration, which upgrades need: %v", err)
	}
	manifest, err := os.ReadFile(filepath.Join(e.repo, uninstallDS))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Kubectl(ctx, e.c, manifest, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "rollout", "status", "daemonset/hwnet-uninstall", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	// Everything hwnet writes: its configuration, shim, sockets, records,
	// the CRI network API's networks, the pools' sockets and every
	// device-info file; a directory left is listed with what it holds,
	// which tells what brought it back. Kubelet's own files in device-plugins are not:
	// its socket, its checkpoint and the checkpoint's temporary file
	// (".<digits>", renamed over it, or left by a kubelet killed as it
	// wrote).
	script := `find "$@" -maxdepth 2 2>/dev/null; find /var/run/k8s.cni.cncf.io/devinfo /var/lib/kubelet/device-plugins ! -type d ! -name kubelet.sock ! -name kubelet_internal_checkpoint ! -name '.[0-9]*' 2>/dev/null; true`
	out, err := Exec(ctx, e.c, nil, "sh", "-c", script, "sh", ConfFile, cniBinDir+"/hwnet", "/run/hwnet/cni.sock", hwnetCacheDir,
		"/run/hwnet/cri-network.sock", "/var/lib/hwnet/networks")
	if err != nil {
		t.Fatal(err)
	}
	if left := strings.Fields(string(out)); len(left) > 0 {
		t.Errorf("left on the node after uninstall: %q", left)
	}
	pod := workloadPod("after-uninstall", "", nil)
	e.cleanupPods(t, pod.Name)
	e.createPod(ctx, t, pod)
	err = cluster.Poll(ctx, podTimeout, "pod Running on the default network", func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && p.Status.Phase != corev1.PodRunning {
			err = fmt.Errorf("pod is %s%s", p.Status.Phase, e.lastEvent(ctx, pod.Name))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if failed, err := e.podEvents(ctx, pod.Name, "FailedCreatePodSandBox"); err != nil || len(failed) > 0 {
		t.Errorf("the pod's sandbox failed before it ran (%v): %v", err, failed)
	}
	e.installOverRunningPods(ctx, t, before, through.Name, pod.Name)
}

// installOverRunningPods installs hwnet again while the pods the default
// network holds without an hwnet record run, deletes them and waits for
// the files their attachments made to go: those not in before.
func (e *env) installOverRunningPods(ctx context.Context, t *testing.T, before []string, pods ...string) {
	t.Helper()
	made := func(ctx context.Context) ([]string, error) {
		files, err := e.attachmentFiles(ctx)
		return slices.DeleteFunc(files, func(f string) bool { return slices.Contains(before, f) }), err
	}
	if files, err := made(ctx); err != nil || len(files) == 0 {
		t.Fatalf("the pods' default network attachments made no file to watch (%v)", err)
	}
	if _, err := Kubectl(ctx, e.c, nil, "-n", AgentNamespace, "delete", "daemonset", "hwnet-uninstall", "--wait"); err != nil {
		t.Fatal(err)
	}
	if _, err := DeployHwnet(ctx, e.c, e.repo, testWriter{t}); err != nil {
		t.Fatal(err)
	}
	if err := e.deletePods(ctx, pods...); err != nil {
		t.Fatal(err)
	}
	err := cluster.Poll(ctx, podTimeout, "the files of the pods without an hwnet record gone", func(ctx context.Context) error {
		files, err := made(ctx)
		if err == nil && len(files) > 0 {
			err = fmt.Errorf("left: %v", files)
		}
		return err
	})
	if err != nil {
		t.Error(err)
	}
}
