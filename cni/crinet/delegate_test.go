package crinet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/crinet"
	"github.com/hwnet-io/hwnet/cni/delegate"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/node/podresources"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

const nodeName = "node-1"

// cluster is the harness plus a real API server and the delegator
// hwnet-agent wires: pods select managed networks through crinet.NADs.
type cluster struct {
	*harness
	client kubernetes.Interface
	d      *delegate.Delegator
	conf   []byte
	record string
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{harness: newHarness(t)}
	apiServer := kubeapi.Start(t)
	apiServer.CreateNamespace(t, "cnf")
	var err error
	if c.client, err = kubernetes.NewForConfig(apiServer.Config()); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	pods := cache.NewInformerPods(c.client, nodeName, quiet)
	go pods.Run(t.Context())
	kubelet, err := testkubelet.ServePodResources(filepath.Join(c.dir, "pod-resources.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.Close)
	devs, err := podresources.Dial(t.Context(), filepath.Join(c.dir, "pod-resources.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devs.Close() })
	statusWriter := report.NewStatusWriter(c.client, "hwnet", quiet)
	t.Cleanup(statusWriter.Shutdown)
	c.d = delegate.New(delegate.Options{ConfDir: c.confDir, DPDevinfoDir: filepath.Join(c.dir, "devinfo/dp"),
		CNIDevinfoDir: filepath.Join(c.dir, "devinfo/cni"), Pods: pods, NADs: crinet.NADs{Store: c.store},
		Devices: devs, Status: statusWriter, PodWait: 20 * time.Second})
	c.record = filepath.Join(c.dir, "record")
	def := filepath.Join(c.confDir, "10-podnet.conflist")
	writeTestFile(t, def, `{"cniVersion":"1.1.0","name":"podnet","plugins":[{"type":"hwnet-test-plugin","ipam":{"type":"static","addresses":[{"address":"10.244.0.5/24"}]}}]}`)
	c.conf, _ = json.Marshal(pluginconf.Conf{CNIVersion: "1.1.0", Name: "hwnet", Type: "hwnet",
		CacheDir: filepath.Join(c.dir, "cni"), DefaultNetwork: def})
	return c
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// createPod makes a pod on the node selecting networks and waits until
// the delegator's pod cache holds it.
func (c *cluster) createPod(name, networks string) *corev1.Pod {
	c.t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cnf",
		Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": networks}},
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "none"}}}}
	got, err := c.client.CoreV1().Pods("cnf").Create(c.t.Context(), pod, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return got
}

func (c *cluster) call(command, containerID string, pod *corev1.Pod) error {
	return c.callCtx(c.t.Context(), command, containerID, pod)
}

// callCtx serves one CNI request as hwnet-agent does: the delegator
// wrapped in crinet.Attaching.
func (c *cluster) callCtx(ctx context.Context, command, containerID string, pod *corev1.Pod) error {
	req := &wire.Request{Command: command, ContainerID: containerID, Netns: "/var/run/netns/" + containerID,
		IfName: "eth0", Path: c.bin, Config: c.conf,
		Args: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_INFRA_CONTAINER_ID=%s;K8S_POD_UID=%s",
			pod.Namespace, pod.Name, containerID, pod.UID)}
	_, err := crinet.Attaching{Next: c.d}.Handle(ctx, req)
	return err
}

// recordedNetwork is a managed network of two recorder plugins, both
// recording into the cluster's file and both tagged with tag, so a mix of
// two versions shows in what the plugins were given.
func (c *cluster) recordedNetwork(tag string) *crinetapi.NetworkConfig {
	plugin := func(extra map[string]string) *crinetapi.CNIv1PluginConfig {
		p := map[string]string{"recordFile": c.record, "tag": tag}
		for k, v := range extra {
			p[k] = v
		}
		return &crinetapi.CNIv1PluginConfig{Type: cniplugins.Recorder, Capabilities: []string{"ips"}, Parameters: p}
	}
	return &crinetapi.NetworkConfig{
		Metadata: &crinetapi.NetworkMetadata{Name: "net-a", Namespace: "cnf"},
		Cniv1Config: &crinetapi.CNIv1Config{CniVersion: "1.1.0", Plugins: []*crinetapi.CNIv1PluginConfig{
			plugin(map[string]string{"ipam": `{"type":"static"}`}), plugin(nil)}},
	}
}

// waitStatus waits until the pod's network-status holds want's name.
func (c *cluster) waitStatus(pod *corev1.Pod, name string) status.NetworkStatus {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	w, err := c.client.CoreV1().Pods("cnf").Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + pod.Name})
	if err != nil {
		c.t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		list, _ := status.Decode(p.Annotations["k8s.v1.cni.cncf.io/network-status"])
		for _, st := range list {
			if st.Name == name {
				return st
			}
		}
	}
	c.t.Fatalf("pod %s: network-status never listed %s", pod.Name, name)
	return status.NetworkStatus{}
}

// A pod selecting a managed network by name (its namespace defaulting to
// the pod's) is attached through the delegator; its IPs show under the
// network's name in network-status and in ListPodNetwork.
func TestCRINet_PodIP_ThroughDelegatorAndNetworkStatus(t *testing.T) {
	c := newCluster(t)
	c.mustSet(c.recordedNetwork("a"))
	pod := c.createPod("pod-1", `[{"name":"net-a","ips":["10.56.0.10/24"]}]`)
	if err := c.call("ADD", "c1", pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	st := c.waitStatus(pod, "cnf/net-a")
	if strings.Join(st.IPs, ",") != "10.56.0.10/24" || st.Interface != "net1" {
		t.Errorf("network-status: %+v", st)
	}
	listed := c.list()["cnf/net-a"]
	if len(listed.GetPods()) != 1 || listed.GetPods()[0].GetIps()[0].GetIp() != "10.56.0.10" ||
		listed.GetPods()[0].GetIps()[0].GetNetworkName() != "cnf/net-a" || listed.GetPods()[0].GetPodName() != "pod-1" {
		t.Errorf("ListPodNetwork pods: %v", listed.GetPods())
	}
	if err := c.remove("cnf", "net-a", 0); code(err).String() != "FailedPrecondition" {
		t.Errorf("Remove while pod-1 runs: %v", err)
	}
	if err := c.call("DEL", "c1", pod); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	if err := c.remove("cnf", "net-a", 0); err != nil {
		t.Errorf("Remove after pod-1's DEL: %v", err)
	}
	if err := c.call("ADD", "c2", pod); err == nil || !strings.Contains(err.Error(), "cnf/net-a") {
		t.Errorf("ADD after Remove: got %v, want the network not found", err)
	}
}

// Sets racing pods' ADDs give every ADD one version whole: both plugins
// of each attachment carry the same tag, and the attachment's
// configuration is one of the two stored ones.
func TestCRINet_Concurrency_SetRacingPodADD(t *testing.T) {
	c := newCluster(t)
	versions := []*crinetapi.NetworkConfig{c.recordedNetwork("a"), c.recordedNetwork("b")}
	c.mustSet(versions[0])
	pod := c.createPod("pod-1", `[{"name":"net-a","ips":["10.56.0.10/24"]}]`)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 1; ctx.Err() == nil; i++ {
			if _, err := c.set(versions[i%2]); err != nil && ctx.Err() == nil {
				t.Errorf("SetPodNetwork: %v", err)
				return
			}
		}
	})
	const adds = 12
	for i := range adds {
		id := fmt.Sprintf("c%d", i)
		if err := c.call("ADD", id, pod); err != nil {
			t.Fatalf("ADD %s: %v", id, err)
		}
		if err := c.call("DEL", id, pod); err != nil {
			t.Fatalf("DEL %s: %v", id, err)
		}
	}
	cancel()
	wg.Wait()
	tags := map[string][]string{}
	for _, r := range cniplugins.ReadRecords(t, c.record) {
		if r.Command != "ADD" {
			continue
		}
		var conf struct{ Tag string }
		json.Unmarshal(r.Stdin, &conf)
		id := r.Env["CNI_CONTAINERID"]
		tags[id] = append(tags[id], conf.Tag)
	}
	if len(tags) != adds {
		t.Fatalf("ADDs recorded for %d containers, want %d", len(tags), adds)
	}
	seen := map[string]int{}
	for id, got := range tags {
		if len(got) != 2 || got[0] != got[1] {
			t.Errorf("container %s: plugins got versions %v, want one version for both", id, got)
		}
		seen[got[0]]++
	}
	t.Logf("ADDs per version: %v", seen)
}

// A network an ADD is attaching a pod to, before the pod's attachment
// record exists, is held: Remove refuses it until the ADD is done.
func TestCRINet_RemovePodNetwork_RefusedWhileADDInFlight(t *testing.T) {
	c := newCluster(t)
	hanging := c.recordedNetwork("a")
	hanging.Cniv1Config.Plugins[0].Parameters["hangOn"] = `["ADD"]`
	c.mustSet(hanging)
	pod := c.createPod("pod-1", `[{"name":"net-a","ips":["10.56.0.10/24"]}]`)
	ctx, cancel := context.WithCancel(t.Context())
	added := make(chan error, 1)
	go func() { added <- c.callCtx(ctx, "ADD", "c1", pod) }()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for len(cniplugins.ReadRecords(t, c.record)) == 0 {
		select {
		case err := <-added:
			t.Fatalf("ADD returned before its plugin ran: %v", err)
		case <-tick.C:
		}
	}
	if err := c.remove("cnf", "net-a", 0); code(err).String() != "FailedPrecondition" || !strings.Contains(err.Error(), "attaching") {
		t.Errorf("Remove while an ADD is attaching: got %v, want FailedPrecondition", err)
	}
	if c.list()["cnf/net-a"] == nil {
		t.Fatalf("the network went while an ADD was attaching")
	}
	cancel()
	if err := <-added; err == nil {
		t.Fatalf("the hanging ADD succeeded")
	}
	if err := c.remove("cnf", "net-a", 0); err != nil {
		t.Errorf("Remove after the ADD failed: %v", err)
	}
}
