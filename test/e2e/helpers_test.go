package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	podresv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
)

// Resources of deploy/pools.yaml and the NPWG annotations.
const (
	sriovResource corev1.ResourceName = "intel.com/sriov_netdevice"
	dpdkResource  corev1.ResourceName = "intel.com/sriov_dpdk"
	fabricA       corev1.ResourceName = "intel.com/sriov_fabric_a"
	ibResource    corev1.ResourceName = "nvidia.com/ib"

	networksKey  = "k8s.v1.cni.cncf.io/networks"
	statusKey    = "k8s.v1.cni.cncf.io/network-status"
	podNamespace = "default"
	container    = "workload"
	podTimeout   = 2 * time.Minute
	leakTimeout  = 30 * time.Second
)

// Directories, inside the cluster's namespaces, where an attachment leaves
// files that must go with it: hwnet's records (deploy/hwnet-agent.yaml's
// --cni-cache-dir), the CNI device-info files, the delegates' state
// (host-local leases, libcni's result cache) with the test plugin's.
var attachmentDirs = []string{hwnetCacheDir, "/var/run/k8s.cni.cncf.io/devinfo/cni", "/var/lib/cni"}

const (
	hwnetCacheDir = "/var/lib/hwnet/cni"
	// lockFile is the lock file every container shares: it stays.
	lockFile = hwnetCacheDir + "/containers.lock"
	// defaultBridge is the default network's bridge: the first pod
	// creates it and it stays, as with every bridge-based default network.
	defaultBridge = "cni0"
)

// workloadPod is a pod of the workload image that prints its environment
// and waits, selecting networks (the NPWG annotation's value, "" for none)
// and holding devices.
func workloadPod(name, networks string, devices map[corev1.ResourceName]int64) *corev1.Pod {
	limits := corev1.ResourceList{}
	for res, n := range devices {
		limits[res] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podNamespace},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64(2)),
			Containers: []corev1.Container{{
				Name: container, Image: image.Workload, ImagePullPolicy: corev1.PullNever,
				Command:   []string{"/workload", "env"},
				Resources: corev1.ResourceRequirements{Limits: limits},
			}},
		},
	}
	if networks != "" {
		pod.Annotations = map[string]string{networksKey: networks}
	}
	return pod
}

// createPod creates pod and deletes it when the test ends, if the test
// did not.
func (e *env) createPod(ctx context.Context, t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if err := e.create(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

func (e *env) create(ctx context.Context, pod *corev1.Pod) error {
	_, err := e.client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create pod %s: %w", pod.Name, err)
	}
	return nil
}

// cleanupPods deletes the named pods, if they still exist, when the test
// ends, so that a failed test leaves the next one its devices.
func (e *env) cleanupPods(t *testing.T, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), podTimeout)
		defer cancel()
		if err := e.deletePods(ctx, names...); err != nil {
			t.Error(err)
		}
	})
}

// runPod creates pod and waits until it runs with its network-status
// listing the default network and attachments more.
func (e *env) runPod(ctx context.Context, pod *corev1.Pod, attachments int) (*corev1.Pod, error) {
	if err := e.create(ctx, pod); err != nil {
		return nil, err
	}
	return e.waitRunning(ctx, pod.Name, attachments)
}

// waitRunning waits until the pod runs and its network-status (written
// after the ADD, in the background) has attachments+1 entries.
func (e *env) waitRunning(ctx context.Context, name string, attachments int) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := cluster.Poll(ctx, podTimeout, "pod "+name+" Running with its network-status", func(ctx context.Context) error {
		var err error
		if pod, err = e.client.CoreV1().Pods(podNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return err
		}
		if pod.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod is %s%s", pod.Status.Phase, e.lastEvent(ctx, name))
		}
		statuses, err := parseNetworkStatus(pod)
		if err != nil {
			return err
		}
		if len(statuses) != attachments+1 {
			return fmt.Errorf("network-status has %d entries, want %d", len(statuses), attachments+1)
		}
		return nil
	})
	return pod, err
}

// lastEvent quotes the pod's latest Warning Event, for a wait's error.
func (e *env) lastEvent(ctx context.Context, pod string) string {
	events, err := e.podEvents(ctx, pod, "")
	if err != nil || len(events) == 0 {
		return ""
	}
	last := events[len(events)-1]
	return fmt.Sprintf(" (last Event: %s %s: %s)", last.Source.Component, last.Reason, last.Message)
}

// podEvents lists the pod's Warning Events, oldest first, only those with
// reason unless reason is "".
func (e *env) podEvents(ctx context.Context, pod, reason string) ([]corev1.Event, error) {
	selector := "type=Warning,involvedObject.name=" + pod
	if reason != "" {
		selector += ",reason=" + reason
	}
	list, err := e.client.CoreV1().Events(podNamespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(list.Items, func(a, b corev1.Event) int { return a.LastTimestamp.Compare(b.LastTimestamp.Time) })
	return list.Items, nil
}

// deletePods deletes the pods and waits until they are gone: kubelet has
// stopped their sandboxes, so the runtime's CNI DEL has run.
func (e *env) deletePods(ctx context.Context, names ...string) error {
	var errs []error
	for _, name := range names {
		err := e.client.CoreV1().Pods(podNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for _, name := range names {
		errs = append(errs, cluster.Poll(ctx, podTimeout, "pod "+name+" gone", func(ctx context.Context) error {
			_, err := e.client.CoreV1().Pods(podNamespace).Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return errors.Join(err, errors.New("pod still exists"))
		}))
	}
	return errors.Join(errs...)
}

// parallel runs fn(0) ... fn(n-1) at once and reports every error.
func parallel(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = fn(i) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// parseNetworkStatus decodes the pod's network-status annotation into the
// NAD client's types, as users' tools read it.
func parseNetworkStatus(pod *corev1.Pod) ([]nadv1.NetworkStatus, error) {
	value, ok := pod.Annotations[statusKey]
	if !ok {
		return nil, fmt.Errorf("pod %s has no %s annotation", pod.Name, statusKey)
	}
	var statuses []nadv1.NetworkStatus
	if err := json.Unmarshal([]byte(value), &statuses); err != nil {
		return nil, fmt.Errorf("pod %s %s %q: %w", pod.Name, statusKey, value, err)
	}
	return statuses, nil
}

func networkStatus(t *testing.T, pod *corev1.Pod) []nadv1.NetworkStatus {
	t.Helper()
	statuses, err := parseNetworkStatus(pod)
	if err != nil {
		t.Fatal(err)
	}
	return statuses
}

// pciAddress is the device-info PCI address of an attachment's status.
func pciAddress(st nadv1.NetworkStatus) string {
	if st.DeviceInfo == nil || st.DeviceInfo.Pci == nil {
		return ""
	}
	return st.DeviceInfo.Pci.PciAddress
}

// workloadEnvEnd is the line `/workload env` prints after the environment
// (test/e2e/workload's envEnd): the log has each line as soon as it is
// written, so a log read meanwhile has only some.
const workloadEnvEnd = "-- end of environment --"

// podEnv is the container's environment as `/workload env` printed it
// to its log, once the log has all of it.
func (e *env) podEnv(ctx context.Context, t *testing.T, pod string) map[string]string {
	t.Helper()
	vars := map[string]string{}
	err := cluster.Poll(ctx, podTimeout, "pod "+pod+"'s environment in its log", func(ctx context.Context) error {
		logs, err := e.client.CoreV1().Pods(podNamespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		if err != nil {
			return err
		}
		scanner := bufio.NewScanner(bytes.NewReader(logs))
		for scanner.Scan() {
			if scanner.Text() == workloadEnvEnd {
				return nil
			}
			if k, v, ok := strings.Cut(scanner.Text(), "="); ok {
				vars[k] = v
			}
		}
		return fmt.Errorf("log has not the whole environment yet: %q", logs)
	})
	if err != nil {
		t.Fatal(err)
	}
	return vars
}

// containerPID is the host PID of the pod's workload container, from
// containerd.
func (e *env) containerPID(ctx context.Context, t *testing.T, pod *corev1.Pod) int {
	t.Helper()
	if len(pod.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s has no container status", pod.Name)
	}
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	out, err := Exec(ctx, e.nodeOf(t, pod.Spec.NodeName), nil, "ctr", "-n", "k8s.io", "task", "ls")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == id {
			pid, err := strconv.Atoi(fields[1])
			if err != nil {
				t.Fatalf("ctr task ls: %q: %v", line, err)
			}
			return pid
		}
	}
	t.Fatalf("containerd runs no task %s of pod %s:\n%s", id, pod.Name, out)
	return 0
}

// nodeOf is the cluster's node named name.
func (e *env) nodeOf(t *testing.T, name string) *cluster.Cluster {
	t.Helper()
	for _, n := range e.c.Nodes() {
		if n.NodeName() == name {
			return n
		}
	}
	t.Fatalf("the cluster has no node %q", name)
	return nil
}

// podLink is what the tests check of a link in a pod's netns.
type podLink struct {
	MAC   string
	Addrs []string // IPv4 addresses with prefix
	// Alias is host-device's record of the link's name on the node.
	Alias string
}

// podLinks lists the links of the network namespace of process pid.
func podLinks(t *testing.T, pid int) map[string]podLink {
	t.Helper()
	ns, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	return netnsLinks(t, ns)
}

func netnsLinks(t *testing.T, ns netns.NsHandle) map[string]podLink {
	t.Helper()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]podLink{}
	for _, l := range links {
		addrs, err := h.AddrList(l, netlink.FAMILY_V4)
		if err != nil {
			t.Fatal(err)
		}
		pl := podLink{MAC: l.Attrs().HardwareAddr.String(), Alias: l.Attrs().Alias}
		for _, a := range addrs {
			pl.Addrs = append(pl.Addrs, a.IPNet.String())
		}
		out[l.Attrs().Name] = pl
	}
	return out
}

// nodeState is what pods may change on the node and must give back.
type nodeState struct {
	// Links are the netdevs in the node's network namespace but
	// defaultBridge.
	Links []string
	// Files are those under attachmentDirs but hwnet's lock file and
	// host-local's lock and last_reserved_ip files, which outlive every
	// lease.
	Files []string
	// Allocated are the devices kubelet's PodResources lists as held,
	// each as "resource device namespace/pod".
	Allocated []string
}

func (e *env) snapshot(ctx context.Context) (nodeState, error) {
	var s nodeState
	links, err := e.nodeLinks()
	if err != nil {
		return s, err
	}
	s.Links = links
	if s.Files, err = e.attachmentFiles(ctx); err != nil {
		return s, err
	}
	s.Allocated, err = e.allocated(ctx)
	return s, err
}

func (e *env) nodeLinks() ([]string, error) {
	ns, err := netns.GetFromName(e.c.Node().NetnsName())
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range links {
		if l.Attrs().Name != defaultBridge {
			names = append(names, l.Attrs().Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (e *env) attachmentFiles(ctx context.Context) ([]string, error) {
	files, err := e.find(ctx, attachmentDirs...)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(files, func(file string) bool {
		base := path.Base(file)
		return file == lockFile || base == "lock" || strings.HasPrefix(base, "last_reserved_ip")
	}), nil
}

// find lists the files under dirs inside the cluster's namespaces, sorted;
// a missing directory has none.
func (e *env) find(ctx context.Context, dirs ...string) ([]string, error) {
	script := `for d; do if [ -d "$d" ]; then find "$d" -type f; fi; done`
	out, err := Exec(ctx, e.c, nil, "sh", append([]string{"-c", script, "sh"}, dirs...)...)
	if err != nil {
		return nil, err
	}
	files := strings.Fields(string(out))
	slices.Sort(files)
	return files, nil
}

func (e *env) allocated(ctx context.Context) ([]string, error) {
	resp, err := e.podres.List(ctx, &podresv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources List: %w", err)
	}
	var held []string
	for _, p := range resp.PodResources {
		for _, c := range p.Containers {
			for _, d := range c.Devices {
				for _, id := range d.DeviceIds {
					held = append(held, fmt.Sprintf("%s %s %s/%s", d.ResourceName, id, p.Namespace, p.Name))
				}
			}
		}
	}
	slices.Sort(held)
	return held, nil
}

// kubeletDevices counts the devices kubelet can allocate per resource:
// those of the device plugins registered with it.
func (e *env) kubeletDevices(ctx context.Context) (Pools, error) {
	resp, err := e.podres.GetAllocatableResources(ctx, &podresv1.AllocatableResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet PodResources GetAllocatableResources: %w", err)
	}
	got := Pools{}
	for _, d := range resp.Devices {
		got[corev1.ResourceName(d.ResourceName)] += int64(len(d.DeviceIds))
	}
	return got, nil
}

func (e *env) mustSnapshot(ctx context.Context, t *testing.T) nodeState {
	t.Helper()
	s, err := e.snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// deleteLeavingNothing deletes the pods and checks that the node is back
// to before.
func (e *env) deleteLeavingNothing(ctx context.Context, t *testing.T, before nodeState, names ...string) {
	t.Helper()
	start := time.Now()
	if err := e.deletePods(ctx, names...); err != nil {
		t.Fatal(err)
	}
	e.checkNoLeaks(ctx, t, before, true)
	t.Logf("%d pod(s) deleted and the node as before in %.1fs", len(names), time.Since(start).Seconds())
}

// checkNoLeaks waits until the node is back to before: every link back in
// the node's netns, no attachment file left, and (unless pods still hold
// them on purpose, withAllocations false) every device free again.
func (e *env) checkNoLeaks(ctx context.Context, t *testing.T, before nodeState, withAllocations bool) {
	t.Helper()
	e.checkNoLeaksWithin(ctx, t, before, withAllocations, leakTimeout)
}

// checkNoLeaksWithin is checkNoLeaks waiting up to timeout.
func (e *env) checkNoLeaksWithin(ctx context.Context, t *testing.T, before nodeState, withAllocations bool, timeout time.Duration) {
	t.Helper()
	var diff string
	err := cluster.Poll(ctx, timeout, "the node's links, files and devices as before", func(ctx context.Context) error {
		now, err := e.snapshot(ctx)
		if err != nil {
			return err
		}
		diff = stateDiff(before, now, withAllocations)
		if diff != "" {
			return errors.New("leaked")
		}
		return nil
	})
	if err != nil {
		t.Errorf("%v:\n%s", err, diff)
	}
}

func stateDiff(before, now nodeState, withAllocations bool) string {
	var b strings.Builder
	listDiff(&b, "node netns link", before.Links, now.Links)
	listDiff(&b, "file", before.Files, now.Files)
	if withAllocations {
		listDiff(&b, "allocated device", before.Allocated, now.Allocated)
	}
	return b.String()
}

// listDiff writes what now has that before had not (+) and the reverse (-).
func listDiff(b *strings.Builder, what string, before, now []string) {
	for _, s := range now {
		if !slices.Contains(before, s) {
			fmt.Fprintf(b, "  + %s %s\n", what, s)
		}
	}
	for _, s := range before {
		if !slices.Contains(now, s) {
			fmt.Fprintf(b, "  - %s %s\n", what, s)
		}
	}
}

// applyUntilTestEnds applies object; when the test ends it applies
// restore instead, or, with restore nil, deletes object.
func (e *env) applyUntilTestEnds(ctx context.Context, t *testing.T, object string, restore []byte) {
	t.Helper()
	if _, err := Kubectl(ctx, e.c, []byte(object), "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		args := []string{"apply", "-f", "-"}
		if restore == nil {
			restore, args = []byte(object), []string{"delete", "--ignore-not-found", "-f", "-"}
		}
		if _, err := Kubectl(ctx, e.c, restore, args...); err != nil {
			t.Error(err)
		}
	})
}
