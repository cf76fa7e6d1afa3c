package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// Network claim examples of the harness, in test/e2e/testdata/dra.
const (
	sriovNetTemplate    = "sriov-net-claim-template.yaml"
	sriovNetOneTemplate = "sriov-net-one-vf-claim-template.yaml"
	ibNetTemplate       = "ib-net-claim-template.yaml"
	badNetTemplate      = "bad-network-claim-template.yaml"
	// claimNetDevices are sriov_netdevice's 6 VFs and ib's 4.
	claimNetDevices = 10
	// churnRounds is how many pods each lane of the churn runs in turn.
	churnRounds = 5
)

// claimNetPoolsConfig is deploy/pools.yaml with the sriov_netdevice and
// ib pools in DRA mode.
func claimNetPoolsConfig(t *testing.T, repo string) []byte {
	t.Helper()
	var out []string
	for line := range strings.Lines(string(readRepoFile(t, repo, PoolsFile))) {
		out = append(out, line)
		entry := strings.TrimSpace(line)
		if strings.HasPrefix(entry, "- resourceName: sriov_netdevice ") || strings.HasPrefix(entry, "- resourceName: ib ") {
			out = append(out, "    mode: dra\n")
		}
	}
	return []byte(strings.Join(out, ""))
}

// TestKEP4817_NetworkClaims: with sriov_netdevice and ib in DRA mode, a
// pod whose claim asks two VFs on sriov-net as net1 and net2 gets them
// with their addresses, and `kubectl get resourceclaim -o yaml` shows each
// device's interfaceName, ips and hardwareAddress with Ready; an
// InfiniBand claim shows the 20-byte address; a bad configuration leaves
// the pod ContainerCreating with an Event naming the field; 20 claim pods
// created and deleted leak nothing.
func TestKEP4817_NetworkClaims(t *testing.T) {
	e := setup(t)
	// Beside testTimeout's three claims, each round of the churn may take
	// a pod's start and its deletion: in CI, on 2 cores shared with two
	// more clusters and the unit tests, a round took 50 s.
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout+churnRounds*2*podTimeout)
	defer cancel()
	if err := InstallCNIPlugin(ctx, e.c, filepath.Join(cniplugins.Dir(t), cniplugins.Recorder)); err != nil {
		t.Fatal(err)
	}
	original := readRepoFile(t, e.repo, PoolsFile)
	e.usePools(ctx, t, claimNetPoolsConfig(t, e.repo))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.usePools(ctx, t, original)
	})
	e.slices(t, "the DRA pools' devices published", func(d kubeapi.SliceDevices) bool { return len(d) == claimNetDevices })
	e.createTemplates(ctx, t, sriovNetTemplate, sriovNetOneTemplate, ibNetTemplate, badNetTemplate)
	before := e.mustSnapshot(ctx, t)
	t.Run("two VFs on sriov-net", func(t *testing.T) { e.twoVFClaim(ctx, t) })
	t.Run("InfiniBand", func(t *testing.T) { e.ibClaim(ctx, t) })
	t.Run("bad configuration", func(t *testing.T) { e.badClaimConfig(ctx, t) })
	t.Run("20 cycles", func(t *testing.T) { e.claimChurn(ctx, t) })
	e.checkNoLeaks(ctx, t, before, true)
	if left := e.cdiSpecs(ctx, t); len(left) > 0 {
		t.Errorf("CDI specs left: %v", left)
	}
}

func (e *env) twoVFClaim(ctx context.Context, t *testing.T) {
	pod := e.draPod(t, claimPodFile, "claim-net", "sriov-net-two-vfs")
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("network-status: %s", pod.Annotations[statusKey])
	links := podLinks(t, e.containerPID(ctx, t, pod))
	want := map[string]string{"net1": "10.56.7.1/24", "net2": "10.56.7.2/24"}
	for ifname, ip := range want {
		if l, ok := links[ifname]; !ok || !slices.Contains(l.Addrs, ip) {
			t.Errorf("pod link %s: %+v, want address %s", ifname, l, ip)
		}
	}
	for _, d := range e.claimDevices(ctx, t, pod) {
		nd := d.NetworkData
		if nd == nil || want[nd.InterfaceName] == "" || !slices.Equal(nd.IPs, []string{want[nd.InterfaceName]}) ||
			nd.HardwareAddress != links[nd.InterfaceName].MAC || !readyTrue(d) {
			t.Errorf("claim device %s: %+v conditions %+v, want networkData of %v and Ready", d.Device, nd, d.Conditions, want)
		}
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}

func (e *env) ibClaim(ctx context.Context, t *testing.T) {
	pod := e.draPod(t, claimPodFile, "claim-ib", "ib-net-one-vf")
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	devs := e.claimDevices(ctx, t, pod)
	if len(devs) != 1 || devs[0].NetworkData == nil {
		t.Fatalf("claim devices %+v, want one with networkData", devs)
	}
	mac, err := net.ParseMAC(devs[0].NetworkData.HardwareAddress)
	if err != nil || len(mac) != 20 || !strings.HasSuffix(devs[0].NetworkData.HardwareAddress, "00:11:22:33:44:55:66:88") || !readyTrue(devs[0]) {
		t.Errorf("InfiniBand claim device %+v, want a 20-byte hardwareAddress ending in the GUID, Ready", devs[0])
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}

func (e *env) badClaimConfig(ctx context.Context, t *testing.T) {
	pod := e.draPod(t, claimPodFile, "claim-bad", "bad-network-config")
	e.cleanupPods(t, pod.Name)
	e.createPod(ctx, t, pod)
	event := e.waitEvent(ctx, t, pod.Name, "FailedPrepareDynamicResources")
	t.Logf("Event %s from %s: %s", event.Reason, event.Source.Component, event.Message)
	if !strings.Contains(event.Message, `"mac" "zz:11"`) || !strings.Contains(event.Message, "opaque.parameters") {
		t.Errorf("Event %q, want it to name the configuration's field and value", event.Message)
	}
	e.checkContainerCreating(ctx, t, pod.Name)
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}
}

// claimChurn creates and deletes 20 pods with a one-VF network claim.
func (e *env) claimChurn(ctx context.Context, t *testing.T) {
	// Lanes of pods, each with a claim of its own, as
	// TestPodChurnLeaksNothing churns: prepares and unprepares overlap, as
	// on a node. The pool has a VF for every lane.
	const lanes, rounds = 4, churnRounds
	pods := make([]*corev1.Pod, lanes*rounds)
	for i := range pods {
		pods[i] = e.draPod(t, claimPodFile, fmt.Sprintf("claim-churn-%d", i), "sriov-net-one-vf")
		e.cleanupPods(t, pods[i].Name)
	}
	parallel(t, lanes, func(lane int) error {
		for i := lane * rounds; i < (lane+1)*rounds; i++ {
			start := time.Now()
			pod, err := e.runPod(ctx, pods[i], 1)
			if err != nil {
				return err
			}
			running := time.Since(start)
			statuses, err := parseNetworkStatus(pod)
			if err != nil {
				return err
			}
			if st := statuses[1]; st.Interface != "net1" || pciAddress(st) == "" {
				return fmt.Errorf("pod %s network-status[1] %+v, want net1 with its VF", pod.Name, st)
			}
			if err := e.deletePods(ctx, pod.Name); err != nil {
				return err
			}
			t.Logf("pod %s: Running in %v, gone %v later", pod.Name, running.Round(time.Millisecond), (time.Since(start) - running).Round(time.Millisecond))
		}
		return nil
	})
}

// claimDevices reads the pod's claim with `kubectl get resourceclaim -o
// yaml` and returns its status.devices.
func (e *env) claimDevices(ctx context.Context, t *testing.T, pod *corev1.Pod) []resourceapi.AllocatedDeviceStatus {
	t.Helper()
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s claim statuses %+v, want one claim", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	name := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	var claim resourceapi.ResourceClaim
	err := cluster.Poll(ctx, podTimeout, "claim "+name+" status.devices", func(ctx context.Context) error {
		out, err := Kubectl(ctx, e.c, nil, "get", "resourceclaim", "-n", podNamespace, name, "-o", "yaml")
		if err != nil {
			return err
		}
		if err := yaml.Unmarshal(out, &claim); err != nil {
			return err
		}
		if len(claim.Status.Devices) != len(claim.Status.Allocation.Devices.Results) {
			return fmt.Errorf("status.devices %d of %d devices:\n%s", len(claim.Status.Devices), len(claim.Status.Allocation.Devices.Results), out)
		}
		t.Logf("kubectl get resourceclaim %s -o yaml: status.devices %+v", name, claim.Status.Devices)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return claim.Status.Devices
}

func readyTrue(d resourceapi.AllocatedDeviceStatus) bool {
	return slices.ContainsFunc(d.Conditions, func(c metav1.Condition) bool {
		return c.Type == "Ready" && c.Status == metav1.ConditionTrue
	})
}

func readRepoFile(t *testing.T, repo, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, path))
	if err != nil {
		t.Fatal(err)
	}
	return data
}
