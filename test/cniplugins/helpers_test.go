package cniplugins

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
)

// absentNetns is a CNI_NETNS for the recorder, which never enters it.
const absentNetns = "/var/run/netns/hwnet-cniplugins-absent"

// recorderConf is hwnet-test-plugin's netconf as tests write it.
type recorderConf struct {
	Type         string          `json:"type"`
	Personality  string          `json:"personality,omitempty"`
	DeviceID     string          `json:"deviceID,omitempty"`
	RecordFile   string          `json:"recordFile,omitempty"`
	StateDir     string          `json:"stateDir,omitempty"`
	FailOn       []string        `json:"failOn,omitempty"`
	Capabilities map[string]bool `json:"capabilities,omitempty"`
	IPAM         *hostLocalConf  `json:"ipam,omitempty"`
}

type hostLocalConf struct {
	Type    string `json:"type"`
	Subnet  string `json:"subnet"`
	DataDir string `json:"dataDir"`
}

type confList struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Plugins    []any  `json:"plugins"`
}

// harness runs plugins from Dir through libcni, as hwnet-agent will.
type harness struct {
	dir string
	cni *libcni.CNIConfig
	tmp string
}

func newHarness(t *testing.T) *harness {
	dir := Dir(t)
	return &harness{dir: dir, cni: newCNIConfig(dir, t.TempDir()), tmp: t.TempDir()}
}

// newCNIConfig returns a CNIConfig that goroutines may share: given no
// Exec, libcni sets one on first use, racing with every other first use.
func newCNIConfig(dir, cacheDir string) *libcni.CNIConfig {
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	return libcni.NewCNIConfigWithCacheDir([]string{dir}, cacheDir, exec)
}

// recorder returns a recorder netconf that records into and keeps state in
// the harness's scratch directory.
func (h *harness) recorder(personality, deviceID string) recorderConf {
	return recorderConf{
		Type: Recorder, Personality: personality, DeviceID: deviceID,
		RecordFile: h.recordFile(), StateDir: h.stateDir(),
	}
}

func (h *harness) recordFile() string { return filepath.Join(h.tmp, "records.jsonl") }
func (h *harness) stateDir() string   { return filepath.Join(h.tmp, "state") }

// hostLocal returns an IPAM section whose allocations live in the scratch
// directory.
func (h *harness) hostLocal() *hostLocalConf {
	return &hostLocalConf{Type: "host-local", Subnet: "192.0.2.0/24", DataDir: filepath.Join(h.tmp, "ipam")}
}

func newList(t *testing.T, cniVersion string, plugins ...any) *libcni.NetworkConfigList {
	t.Helper()
	data, err := json.Marshal(confList{CNIVersion: cniVersion, Name: "hwnet-test", Plugins: plugins})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		t.Fatalf("conflist %s: %v", data, err)
	}
	return list
}

func attachment(containerID string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: containerID, NetNS: absentNetns, IfName: "net1"}
}

// add runs ADD and returns its result as a 1.0.0 result.
func (h *harness) add(t *testing.T, list *libcni.NetworkConfigList, rt *libcni.RuntimeConf) *types100.Result {
	t.Helper()
	res, err := h.cni.AddNetworkList(t.Context(), list, rt)
	if err != nil {
		t.Fatalf("ADD %s: %v", list.CNIVersion, err)
	}
	if res.Version() != list.CNIVersion {
		t.Errorf("result has cniVersion %q, want the config's %q", res.Version(), list.CNIVersion)
	}
	result, err := types100.NewResultFromResult(res)
	if err != nil {
		t.Fatalf("ADD result: %v", err)
	}
	return result
}

// cniError returns the CNI error err carries, failing the test if none.
func cniError(t *testing.T, err error) *types.Error {
	t.Helper()
	var cniErr *types.Error
	if !errors.As(err, &cniErr) {
		t.Fatalf("got error %v (%T), want a CNI error", err, err)
	}
	return cniErr
}

// hasInterfaces reports whether results of cniVersion list interfaces.
func hasInterfaces(t *testing.T, cniVersion string) bool {
	return atLeast(t, cniVersion, "0.3.0")
}

func atLeast(t *testing.T, cniVersion, min string) bool {
	t.Helper()
	ok, err := version.GreaterThanOrEqualTo(cniVersion, min)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// stateFiles lists the attachments the recorder keeps state for.
func (h *harness) stateFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(h.stateDir())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func commands(records []Record) string {
	var cmds []string
	for _, r := range records {
		cmds = append(cmds, r.Command)
	}
	return strings.Join(cmds, ",")
}
