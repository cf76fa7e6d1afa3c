package cluster

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// counters are the cumulative figures a batch's share is the difference of.
type counters struct {
	requests  float64 // apiserver_request_total, every label summed
	nodeCPU   float64 // s, the cluster's cgroup (control plane, kubelet, containerd, pods)
	daemonCPU float64 // s, the stack's daemon processes
}

func snapshot(ctx context.Context, client kubernetes.Interface, c *cluster.Cluster, daemons []string) (counters, error) {
	var s counters
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return s, fmt.Errorf("kube-apiserver /metrics: %w", err)
	}
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			s.requests += v
		}
	}
	if s.nodeCPU, err = clusterCPU(c); err != nil {
		return s, err
	}
	for _, n := range c.Nodes() {
		for _, pid := range daemonPIDs(n, daemons) {
			s.daemonCPU += cpuOf(pid)
		}
	}
	return s, nil
}

// clusterCPU is the CPU time of every node's cgroup.
func clusterCPU(c *cluster.Cluster) (float64, error) {
	total := 0.0
	for _, n := range c.Nodes() {
		s, err := nodeCPU(n)
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

// nodeCPU is the CPU time of a node's cgroup (cgroupRoot
// /hwnet-e2e/<name>, see test/e2e/cluster), from cgroup v1's cpuacct or
// v2's cpu.stat.
func nodeCPU(c *cluster.Cluster) (float64, error) {
	rel := filepath.Join("hwnet-e2e", c.NodeName())
	if data, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", rel, "cpuacct.usage")); err == nil {
		ns, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
		return ns / 1e9, err
	}
	for _, root := range []string{"/sys/fs/cgroup/unified", "/sys/fs/cgroup"} {
		data, err := os.ReadFile(filepath.Join(root, rel, "cpu.stat"))
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
				us, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return us / 1e6, err
			}
		}
	}
	return 0, fmt.Errorf("no CPU accounting for cgroup %s", rel)
}

// daemonPIDs are the processes named one of names (their comm) in the
// node's cgroup.
func daemonPIDs(c *cluster.Cluster, names []string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	mark := "/hwnet-e2e/" + c.NodeName() + "/"
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err != nil || !contains(names, strings.TrimSpace(string(comm))) {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err == nil && strings.Contains(string(cg), mark) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// cpuOf is a process's user+system CPU seconds.
func cpuOf(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

// daemonPeakRSS is, of the SR-IOV nodes, the largest sum of a node's
// daemons' VmHWM, MiB: each daemon's peak since its start this round.
func (be *bench) daemonPeakRSS(names []string) float64 {
	most := 0.0
	for _, n := range be.sriov {
		most = max(most, nodePeakRSS(n, names))
	}
	return most
}

func nodePeakRSS(c *cluster.Cluster, names []string) float64 {
	total := 0.0
	for _, pid := range daemonPIDs(c, names) {
		f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				total += kb / 1024
			}
		}
		f.Close()
	}
	return total
}

// sandboxTimes is containerd's view of one pod's sandbox: RunPodSandbox's
// start and return (the network set up, by CNI, inside it) as its log
// stamps them.
type sandboxTimes struct {
	begin, end time.Time
}

func (be *bench) sandboxTimes(pod string) sandboxTimes {
	for _, n := range be.sriov {
		if st := nodeSandboxTimes(n, pod); !st.begin.IsZero() {
			return st
		}
	}
	return sandboxTimes{}
}

// nodeSandboxTimes is the pod's sandbox as the node's containerd logged
// it; zero when it ran elsewhere.
func nodeSandboxTimes(c *cluster.Cluster, pod string) sandboxTimes {
	var st sandboxTimes
	f, err := os.Open(filepath.Join(c.LogDir(), "containerd.log"))
	if err != nil {
		return st
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "RunPodSandbox for") || !strings.Contains(line, `name:\"`+pod+`\"`) {
			continue
		}
		at := logTime(line)
		if strings.Contains(line, "returns sandbox id") {
			st.end = at
		} else if st.begin.IsZero() {
			st.begin = at
		}
	}
	return st
}

// logTime is a containerd log line's time="..." stamp.
func logTime(line string) time.Time {
	_, rest, ok := strings.Cut(line, `time="`)
	if !ok {
		return time.Time{}
	}
	stamp, _, _ := strings.Cut(rest, `"`)
	t, _ := time.Parse(time.RFC3339Nano, stamp)
	return t
}

func loadavg() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	v, _ := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
	return v
}

func machine() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%d CPUs (%s), load average %.2f at the end, %s", runtime.NumCPU(), model, loadavg(), time.Now().UTC().Format(time.RFC3339))
}
