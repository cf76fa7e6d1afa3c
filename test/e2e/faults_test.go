package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// reconcileWait covers the agent's reconcile interval (deploy/'s default,
// a minute) and the teardown itself.
const reconcileWait = 3 * time.Minute

// TestReconcileTearsDownSandboxesTheRuntimeForgot: an attachment whose
// sandbox the runtime no longer has (it dropped it after a failed or
// interrupted ADD or DEL, and containerd never calls CNI GC) is torn down
// by the agent itself within one reconcile period: its veth, IP lease and
// record go, and the node is back at its baseline (issue 12 item 3).
func TestReconcileTearsDownSandboxesTheRuntimeForgot(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	const sandbox = "forgotten-sandbox-0123456789"
	netns := "hwnet-e2e-forgotten"
	if _, err := Exec(ctx, e.c, nil, "ip", "netns", "add", netns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Exec(context.Background(), e.c, nil, "ip", "netns", "del", netns) })
	e.shimADD(ctx, t, sandbox, "/var/run/netns/"+netns)
	record := hwnetCacheDir + "/containers/" + sandbox + ".json"
	// As old as a sandbox the runtime would long have listed.
	if _, err := Exec(ctx, e.c, nil, "touch", "-d", "-10 minutes", record); err != nil {
		t.Fatal(err)
	}
	err := cluster.Poll(ctx, reconcileWait, "the agent tearing down "+sandbox, func(ctx context.Context) error {
		if _, err := Exec(ctx, e.c, nil, "test", "-e", record); err == nil {
			return fmt.Errorf("record %s still there", record)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.checkNoLeaks(ctx, t, before, false)
}

// shimADD runs the hwnet shim's ADD inside the cluster as the runtime
// would, with hwnet's configuration, for a container the runtime does not
// have.
func (e *env) shimADD(ctx context.Context, t *testing.T, containerID, netnsPath string) {
	t.Helper()
	data, err := Exec(ctx, e.c, nil, "cat", ConfFile)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := libcni.InjectConf(list.Plugins[0], map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.c.Command(ctx, cniBinDir+"/hwnet")
	cmd.Env = append(cmd.Env, "CNI_COMMAND=ADD", "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netnsPath,
		"CNI_IFNAME=eth0", "CNI_PATH="+cniBinDir)
	cmd.Stdin = strings.NewReader(string(conf.Bytes))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hwnet shim ADD: %v: %s", err, out)
	}
	t.Cleanup(func() {
		del := e.c.Command(context.Background(), cniBinDir+"/hwnet")
		del.Env = append(del.Env, "CNI_COMMAND=DEL", "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netnsPath,
			"CNI_IFNAME=eth0", "CNI_PATH="+cniBinDir)
		del.Stdin = strings.NewReader(string(conf.Bytes))
		del.Run()
	})
}

// TestFault_CorruptRecordDoesNotWedgeThePod: a pod whose attachment record
// was truncated is still deleted, and its VF, addresses and files all come
// back: DEL falls back to what it can know (issue 12 item 2).
func TestFault_CorruptRecordDoesNotWedgeThePod(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	pod := workloadPod("corrupt-record", `[{"name": "sriov-net", "ips": ["10.56.5.1/24"]}]`,
		map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	record := hwnetCacheDir + "/containers/" + e.sandboxID(ctx, t, pod) + ".json"
	if _, err := Exec(ctx, e.c, nil, "truncate", "-s", "7", record); err != nil {
		t.Fatal(err)
	}
	e.deleteLeavingNothing(ctx, t, before, pod.Name)
}

// TestFault_AgentKilledDuringADDLeaksNothing: hwnet-agent killed (SIGKILL)
// while a pod's sandbox is being attached; the pod still starts once the
// agent is back, and once it is deleted the node is at its baseline
// (links, records, device-info files, IP leases, allocations) within one
// reconcile period, after every cycle. The plugins the agent ran die with
// it (package pluginexec), and a VF left in a sandbox the runtime then
// destroys comes back to the node as on real hardware (hwnet-vnode-kernel).
// CI runs killCycles cycles; HWNET_E2E_KILL_CYCLES=N runs N (the issue's
// soak is 300).
func TestFault_AgentKilledDuringADDLeaksNothing(t *testing.T) {
	cycles := killCycles
	if v := os.Getenv("HWNET_E2E_KILL_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("HWNET_E2E_KILL_CYCLES=%q: want a positive number of cycles", v)
		}
		cycles = n
	}
	e := setup(t)
	// A cycle takes seconds, plus the agent's restart back-off.
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout+time.Duration(cycles)*time.Minute)
	defer cancel()
	before := e.mustSnapshot(ctx, t)
	for i := range cycles {
		start := time.Now()
		name := fmt.Sprintf("killed-add-%d", i)
		e.cleanupPods(t, name)
		pod := workloadPod(name, fmt.Sprintf(`[{"name": "sriov-net", "ips": ["10.56.6.%d/24"]}]`, i%250+1),
			map[corev1.ResourceName]int64{sriovResource: 1})
		if err := e.create(ctx, pod); err != nil {
			t.Fatal(err)
		}
		e.killAgentWhenScheduled(ctx, t, name, time.Duration(rand.IntN(300))*time.Millisecond)
		if _, err := e.waitRunning(ctx, name, 1); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := e.deletePods(ctx, name); err != nil {
			t.Fatal(err)
		}
		e.checkNoLeaksWithin(ctx, t, before, true, reconcileWait)
		if t.Failed() {
			t.Fatalf("cycle %d left the node off its baseline", i)
		}
		t.Logf("cycle %d: agent killed, pod Running, deleted, node at its baseline in %.1fs", i, time.Since(start).Seconds())
	}
	if err := WaitHwnetReady(ctx, e.c, e.pools, testWriter{t}); err != nil {
		t.Fatal(err)
	}
}

// killCycles is how many kills CI's run of the soak makes.
const killCycles = 3

// killAgentWhenScheduled sends SIGKILL to hwnet-agent, through this
// cluster's containerd, delay after the pod is bound to the node: while
// its sandbox is being set up.
func (e *env) killAgentWhenScheduled(ctx context.Context, t *testing.T, pod string, delay time.Duration) {
	t.Helper()
	mustPoll(ctx, t, "pod "+pod+" scheduled", func(ctx context.Context) error {
		p, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, pod, metav1.GetOptions{})
		if err == nil && p.Spec.NodeName == "" {
			err = errors.New("not yet")
		}
		return err
	})
	time.Sleep(delay) // the fault's timing, not a wait for a condition
	if err := e.killAgent(ctx); err != nil {
		t.Log(err)
	}
}

// TestFault_BadPoolsConfigSurvivesRestart: the pools ConfigMap turned
// invalid, then the agent restarted: it starts on the last good
// configuration (no CrashLoopBackOff), every pool stays allocatable, its
// readiness says it is not ready and a Node Event says why, and a pod
// still gets its VF; the fixed configuration makes it ready again (issue
// 12 item 4).
func TestFault_BadPoolsConfigSurvivesRestart(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	good, err := os.ReadFile(filepath.Join(e.repo, PoolsFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.usePools(context.Background(), t, good) })
	// The running agent turns unready as soon as it rejects the new file.
	old, err := runningAgent(ctx, e.client, e.c.NodeName())
	if err != nil {
		t.Fatal(err)
	}
	cms := e.client.CoreV1().ConfigMaps(AgentNamespace)
	cm, err := cms.Get(ctx, poolsMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{poolsKey: "resourceList: {"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.client.CoreV1().Pods(AgentNamespace).Delete(ctx, old, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var agentPod string
	mustPoll(ctx, t, "a new hwnet-agent Running but not Ready, on the last good pools", func(ctx context.Context) error {
		pods, err := e.client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: AgentSelector})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.Name != old && p.Status.Phase == corev1.PodRunning && !podReady(&p) && p.Status.ContainerStatuses[0].RestartCount == 0 {
				agentPod = p.Name
				return checkAllocatable(ctx, e.client, e.c.NodeName(), e.pools)
			}
		}
		return errors.New("not yet")
	})
	// The node's allocatable may still be the old agent's; kubelet admits
	// the pod only once the new agent's plugin registered (readiness says
	// so, but this agent is not ready by design), or fails it for good.
	mustPoll(ctx, t, "the new hwnet-agent's "+string(sriovResource)+" registered with kubelet", func(ctx context.Context) error {
		return agentLogged(ctx, e.client, agentPod, "registered with kubelet", string(sriovResource))
	})
	mustPoll(ctx, t, "a PoolConfigRejected Event on the node", func(ctx context.Context) error {
		evs, err := e.client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "reason=PoolConfigRejected,involvedObject.kind=Node"})
		if err == nil && len(evs.Items) == 0 {
			err = errors.New("none")
		}
		return err
	})
	pod := workloadPod("bad-config-pod", `[{"name": "sriov-net", "ips": ["10.56.7.1/24"]}]`, map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	if _, err := e.runPod(ctx, pod, 1); err != nil {
		t.Fatal(err)
	}
}

// agentLogged is nil once a line of the agent pod's log holds every one
// of words.
func agentLogged(ctx context.Context, client kubernetes.Interface, pod string, words ...string) error {
	logs, err := client.CoreV1().Pods(AgentNamespace).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(logs)) {
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(line, w) }) {
			return nil
		}
	}
	return fmt.Errorf("no line of %s's log has %q", pod, words)
}
