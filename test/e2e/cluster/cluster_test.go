package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/e2e/image"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestUpRunPodDown brings a real cluster up, runs a pod on the default
// network, looks at the virtual hardware from inside, restarts kubelet and
// checks that Down leaves nothing behind.
func TestUpRunPodDown(t *testing.T) {
	vnodetest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := upForTest(ctx, t, "cluster-test", testImages(ctx, t))
	client := testClient(t, c)

	pod := runPod(ctx, t, c, client)
	if !strings.HasPrefix(pod.Status.PodIP, "10.244.0.") {
		t.Errorf("pod IP %q, want one of the default network 10.244.0.0/24", pod.Status.PodIP)
	}
	checkPodNetns(t, c, pod)
	checkVirtualHardware(ctx, t, c)
	checkHardwareChangesShow(ctx, t, c)
	if err := c.RestartKubelet(ctx); err != nil {
		t.Fatal(err)
	}
	checkNothingLeftAfterDown(ctx, t, c)
}

// testImages builds the e2e images, reusing what TestImageDir holds.
func testImages(ctx context.Context, t testing.TB) []string {
	repo, err := findRepo()
	if err != nil {
		t.Fatal(err)
	}
	images, err := image.Images(ctx, repo, TestImageDir())
	if err != nil {
		t.Fatal(err)
	}
	return images
}

// upForTest brings a cluster up whose node is named name and takes it down
// when the test ends, if the test did not.
func upForTest(ctx context.Context, t *testing.T, name string, images []string) *Cluster {
	t.Helper()
	spec := virtualnode.DefaultSpec()
	spec.Name = name
	c, err := Up(ctx, Config{StateDir: filepath.Join(t.TempDir(), name), Spec: spec,
		Images: images, SandboxImage: image.Pause, Progress: testWriter{t}})
	if c != nil {
		t.Cleanup(func() {
			if err := c.Down(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func testClient(t testing.TB, c *Cluster) kubernetes.Interface {
	t.Helper()
	cfg, err := c.RESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// runPod creates a pod of the workload image and waits until it runs.
func runPod(ctx context.Context, t testing.TB, c *Cluster, client kubernetes.Interface) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "workload"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "workload", Image: image.Workload, ImagePullPolicy: corev1.PullNever,
		}}},
	}
	start := time.Now()
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Pod
	err := Poll(ctx, time.Minute, "pod "+pod.Name+" Running", func(ctx context.Context) error {
		var err error
		if got, err = client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{}); err != nil {
			return err
		}
		if got.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod is %s", got.Status.Phase)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("pod %s not Running: %v; kubelet log: %s", pod.Name, err, c.p.log(kubelet))
	}
	t.Logf("pod Running %.1fs after it was created", time.Since(start).Seconds())
	return got
}

// BenchmarkUpDown measures what a test suite pays for a fresh cluster:
// Up until the node is Ready, a pod until it runs, and Down.
func BenchmarkUpDown(b *testing.B) {
	vnodetest.RequireRoot(b)
	ctx := context.Background()
	spec := virtualnode.DefaultSpec()
	spec.Name = "cluster-bench"
	cfg := Config{StateDir: filepath.Join(b.TempDir(), "state"), Spec: spec,
		Images: testImages(ctx, b), SandboxImage: image.Pause}
	for b.Loop() {
		c, err := Up(ctx, cfg)
		if c != nil {
			b.Cleanup(func() { c.Down(context.Background()) }) // after a failure only: Down is idempotent
		}
		if err != nil {
			b.Fatal(err)
		}
		runPod(ctx, b, c, testClient(b, c))
		if err := c.Down(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// checkPodNetns finds the pod's container in the cluster's cgroups and
// looks into its network namespace: eth0 must hold the pod IP.
func checkPodNetns(t *testing.T, c *Cluster, pod *corev1.Pod) {
	t.Helper()
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "containerd://")
	pid := containerPID(t, c, string(pod.UID), id)
	ns, err := netns.GetFromPath(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	eth0, err := h.LinkByName("eth0")
	if err != nil {
		t.Fatalf("pod netns: %v", err)
	}
	addrs, err := h.AddrList(eth0, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || !addrs[0].IP.Equal(net.ParseIP(pod.Status.PodIP)) {
		t.Errorf("pod netns eth0 has %v, want the pod IP %s", addrs, pod.Status.PodIP)
	}
}

// containerPID reads the container's process from its cgroup, which
// kubelet names after the pod UID and the runtime after the container.
func containerPID(t *testing.T, c *Cluster, podUID, containerID string) int {
	t.Helper()
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	pattern := filepath.Join(hierarchies[0], c.st.CgroupRoot, "kubepods", "*", "pod"+podUID, containerID, "cgroup.procs")
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) != 1 {
		t.Fatalf("container cgroup %s: found %v (%v)", pattern, files, err)
	}
	pids, err := readPIDs(files[0])
	if err != nil || len(pids) == 0 {
		t.Fatalf("container cgroup %s: pids %v (%v)", files[0], pids, err)
	}
	return pids[0]
}

// checkVirtualHardware reads the virtual node's sysfs and devices as the
// cluster's processes see them.
func checkVirtualHardware(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	var vf, vfio virtualnode.Function
	for _, f := range c.Node().Devices() {
		switch {
		case f.IsVF() && f.Driver == "iavf" && vf.Addr == "":
			vf = f
		case f.Driver == "vfio-pci" && vfio.Addr == "":
			vfio = f
		}
	}
	if vf.Addr == "" || vfio.Addr == "" {
		t.Fatalf("the default spec has no iavf VF (%q) or no vfio-pci VF (%q)", vf.Addr, vfio.Addr)
	}
	vendor := inside(ctx, t, c, "cat", "/sys/bus/pci/devices/"+vf.Addr+"/vendor")
	if want := "0x" + vf.Vendor.String(); vendor != want {
		t.Errorf("vendor of %s inside the cluster: %q, want %q", vf.Addr, vendor, want)
	}
	cgroups := inside(ctx, t, c, "cat", "/sys/fs/cgroup/cpuset/cpuset.cpus")
	if cgroups == "" {
		t.Error("/sys/fs/cgroup/cpuset/cpuset.cpus is empty inside the cluster: the real cgroups are hidden")
	}
	group := fmt.Sprintf("/dev/vfio/%d", vfio.IOMMUGroup)
	if got := inside(ctx, t, c, "stat", "-c", "%F", group); got != "character special file" {
		t.Errorf("%s inside the cluster is a %q, want a character special file", group, got)
	}
}

// checkHardwareChangesShow binds a VF to vfio-pci after Up: the cluster
// sees the new driver in /sys at once, and its VFIO group in /dev after
// SyncDevices.
func checkHardwareChangesShow(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	vf, ok := c.Node().Device("0000:3b:01.0")
	if !ok || vf.Driver != "iavf" {
		t.Fatalf("the default spec has no iavf VF at 0000:3b:01.0 (%+v)", vf)
	}
	if err := c.Node().BindDriver(ctx, vf.Addr, "vfio-pci"); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncDevices(); err != nil {
		t.Fatal(err)
	}
	driver := inside(ctx, t, c, "readlink", "-f", "/sys/bus/pci/devices/"+vf.Addr+"/driver")
	if filepath.Base(driver) != "vfio-pci" {
		t.Errorf("driver of %s inside the cluster after BindDriver: %s, want vfio-pci", vf.Addr, driver)
	}
	group := fmt.Sprintf("/dev/vfio/%d", vf.IOMMUGroup)
	if got := inside(ctx, t, c, "stat", "-c", "%F", group); got != "character special file" {
		t.Errorf("%s inside the cluster after SyncDevices is a %q, want a character special file", group, got)
	}
}

// inside runs a command in the cluster's namespaces and returns its
// trimmed output.
func inside(ctx context.Context, t *testing.T, c *Cluster, name string, args ...string) string {
	t.Helper()
	out, err := c.Command(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v inside the cluster: %v: %s", name, args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// checkNothingLeftAfterDown runs Down and looks for every kind of trace.
func checkNothingLeftAfterDown(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	procs := append(c.st.Processes, c.st.Holder)
	ns, release := c.holdMountNS()
	defer release()
	if ns == "" {
		t.Fatalf("the cluster's mount namespace %q cannot be held", c.st.MountNS)
	}
	if err := c.Down(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if p.running() {
			t.Errorf("%s (pid %d) still runs", p.Name, p.PID)
		}
	}
	if pids, err := cgroupPIDs(c.st.CgroupRoot); err != nil || len(pids) > 0 {
		t.Errorf("processes left in the cluster's cgroups: %v (%v)", pids, err)
	}
	if members, err := mountNSMembers(ns); err != nil || len(members) > 0 {
		t.Errorf("processes left in the cluster's mount namespace: %s (%v)", describeProcesses(members), err)
	}
	mountinfo, err := os.ReadFile(threadMountinfo)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mountinfo), c.p.dir) {
		t.Errorf("mounts under %s left:\n%s", c.p.dir, mountinfo)
	}
	if _, err := os.Stat(netnsPath(c.st.Netns)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("netns %s left (%v)", c.st.Netns, err)
	}
	if _, err := os.Stat(c.p.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state directory %s left (%v)", c.p.dir, err)
	}
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hierarchies {
		if _, err := os.Stat(filepath.Join(h, c.st.CgroupRoot)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("cgroup %s left in %s (%v)", c.st.CgroupRoot, h, err)
		}
	}
}

// describeProcesses names each process by PID and command line.
func describeProcesses(pids []int) string {
	names := make([]string, len(pids))
	for i, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		names[i] = fmt.Sprintf("%d (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " ")))
	}
	return strings.Join(names, ", ")
}
