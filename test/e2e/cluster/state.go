package cluster

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// state is what a cluster's state file records: enough for another process
// to use the cluster and for Down to remove every trace of it, also when
// Up died half way.
type state struct {
	// Name is the Kubernetes node's and the virtual node's name.
	Name string `json:"name"`
	// Netns is the virtual node's network namespace, also recorded here so
	// Down can delete it when the node's own state is lost.
	Netns string `json:"netns"`
	// CgroupRoot is kubelet's cgroupRoot, under which every process of the
	// cluster runs, in each cgroup v1 hierarchy.
	CgroupRoot string `json:"cgroupRoot"`
	NodeIP     string `json:"nodeIP,omitempty"`
	KubeBinDir string `json:"kubeBinDir"`
	// Containerd is the containerd binary, "" for Debian's from PATH.
	Containerd string `json:"containerd,omitempty"`
	// ContainerdVersion is what Containerd says its version is ("v2.4.2"):
	// it picks containerd's configuration and the pod network's CNI version.
	ContainerdVersion string `json:"containerdVersion,omitempty"`
	// Holder owns the cluster's mount namespace and sits in its network
	// namespace.
	Holder *process `json:"holder,omitempty"`
	// MountNS names the holder's mount namespace ("mnt:[4026532000]"), to
	// find processes left in it once the holder is gone.
	MountNS string `json:"mountNS,omitempty"`
	// Processes are the daemons in start order.
	Processes []*process `json:"processes,omitempty"`
	// Index is the node's place in the cluster: 0 for the control plane,
	// from 1 for its workers. Its fabric address and pod subnet follow
	// from it (fabric.go).
	Index int `json:"index,omitempty"`
	// Workers name the control plane's workers, each with its own state
	// under nodes/NAME (see paths.worker), in index order.
	Workers []string `json:"workers,omitempty"`
}

// worker tells whether the state is a worker's: it runs only a node's
// daemons, and the control plane's kube-apiserver.
func (st *state) worker() bool { return st.Index > 0 }

// process is one process the cluster started, identified by PID and start
// time, so that a reused PID is never taken for it.
type process struct {
	Name string `json:"name"`
	// Argv is the command run inside the namespaces, for restarts.
	Argv      []string `json:"argv"`
	Log       string   `json:"log"`
	PID       int      `json:"pid"`
	StartTime uint64   `json:"startTime"`
}

func (st *state) process(name string) *process {
	for _, p := range st.Processes {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// processes returns the recorded processes of these names.
func (st *state) processes(names ...string) []*process {
	var procs []*process
	for _, name := range names {
		if p := st.process(name); p != nil {
			procs = append(procs, p)
		}
	}
	return procs
}

// setProcess records p, replacing the process of the same name.
func (st *state) setProcess(p *process) {
	for i, old := range st.Processes {
		if old.Name == p.Name {
			st.Processes[i] = p
			return
		}
	}
	st.Processes = append(st.Processes, p)
}

func readState(path string) (*state, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster state: %w", err)
	}
	st := &state{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("cluster state %s: %w", path, err)
	}
	// Down kills whatever runs in CgroupRoot and deletes Netns: a damaged
	// file must not point them at anything but a cluster's own.
	if st.Name == "" || st.CgroupRoot != cgroupRoot(st.Name) || st.Netns != virtualnode.NetnsPrefix+st.Name {
		return nil, fmt.Errorf("cluster state %s: name %q, cgroupRoot %q and netns %q do not belong together",
			path, st.Name, st.CgroupRoot, st.Netns)
	}
	return st, nil
}

func (st *state) write(path string) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write cluster state: %w", err)
	}
	return nil
}
