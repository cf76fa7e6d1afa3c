package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/hwnet-io/hwnet/node/virtualnode"
)

func TestConfigDefaults(t *testing.T) {
	t.Setenv("HWNET_KUBE_CACHE", "")
	t.Setenv("HWNET_CNI_BIN_CACHE", "")
	t.Setenv(ContainerdBinaryEnv, "")
	t.Setenv(ContainerdVersionEnv, "")
	cfg, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateDir != DefaultStateDir || cfg.SandboxImage != DefaultSandboxImage ||
		cfg.KubeBinDir != "/var/cache/hwnet-ci/kube/"+KubeVersion+"/bin" ||
		cfg.CNIBinDir != "/var/cache/hwnet-ci/cni-bin/"+CNIPluginsVersion {
		t.Errorf("defaults: %+v", cfg)
	}
	if cfg.Spec.Name != DefaultNodeName {
		t.Errorf("default node name %q, want %q", cfg.Spec.Name, DefaultNodeName)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"state dir /", Config{StateDir: "/"}, `StateDir "/"`},
		{"bad spec name", Config{Spec: &virtualnode.Spec{Name: "Bad_Name"}}, "Bad_Name"},
		{"containerd not built", Config{ContainerdVersion: "v0.0.0-none"}, "make containerd-cdi CONTAINERD_VERSION=v0.0.0-none"},
		{"worker named as the control plane", Config{Workers: []*virtualnode.Spec{{Name: DefaultNodeName}}},
			`workers[0]: node name "` + DefaultNodeName + `" is taken`},
		{"two workers of one name", Config{Workers: []*virtualnode.Spec{{Name: "w"}, {Name: "w"}}}, `workers[1]: node name "w" is taken`},
		{"bad worker name", Config{Workers: []*virtualnode.Spec{{Name: "W!"}}}, "workers[0]"},
		{"nil worker", Config{Workers: []*virtualnode.Spec{nil}}, "workers[0]: no spec"},
		{"too many nodes", Config{Workers: make([]*virtualnode.Spec, maxNodes)}, "at most 200"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.withDefaults()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("withDefaults: error %v, want one naming %s", err, tt.want)
			}
		})
	}
}

// TestWorkerSpecs: the workers of a cluster of n nodes are named after the
// control plane's node and have the default SR-IOV hardware, except the
// last of three or more, which has none.
func TestWorkerSpecs(t *testing.T) {
	tests := []struct {
		nodes     int
		names     []string
		withSRIOV []bool
	}{
		{1, nil, nil},
		{2, []string{"cp-w1"}, []bool{true}},
		{3, []string{"cp-w1", "cp-w2"}, []bool{true, false}},
		{4, []string{"cp-w1", "cp-w2", "cp-w3"}, []bool{true, true, false}},
	}
	for _, tt := range tests {
		specs := WorkerSpecs("cp", tt.nodes)
		var names []string
		var withSRIOV []bool
		for _, s := range specs {
			names = append(names, s.Name)
			withSRIOV = append(withSRIOV, len(s.PFs) > 0)
		}
		if !slices.Equal(names, tt.names) || !slices.Equal(withSRIOV, tt.withSRIOV) {
			t.Errorf("WorkerSpecs(cp, %d): names %v with SR-IOV %v, want %v and %v", tt.nodes, names, withSRIOV, tt.names, tt.withSRIOV)
		}
		cfg := Config{Spec: &virtualnode.Spec{Name: "cp"}, Workers: specs, Containerd: "/bin/true"}
		if _, err := cfg.withDefaults(); err != nil {
			t.Errorf("WorkerSpecs(cp, %d): %v", tt.nodes, err)
		}
	}
}

// TestFabricAddresses: node i's fabric address and pod subnet are its own.
func TestFabricAddresses(t *testing.T) {
	for i, want := range []struct{ ip, subnet string }{{"10.250.0.1", "10.244.0.0/24"}, {"10.250.0.2", "10.244.1.0/24"}, {"10.250.0.200", "10.244.199.0/24"}} {
		n := i
		if i == 2 {
			n = maxNodes - 1
		}
		if ip, subnet := fabricIP(n).String(), podSubnetOf(n).String(); ip != want.ip || subnet != want.subnet {
			t.Errorf("node %d: fabric %s, pod subnet %s, want %s and %s", n, ip, subnet, want.ip, want.subnet)
		}
	}
}

// TestManagementNIC: the node IP lives on the NIC holding the default
// route, which a spec without one gets from the default spec.
func TestManagementNIC(t *testing.T) {
	spec := &virtualnode.Spec{Name: "pf-only", PFs: []virtualnode.PFSpec{{Model: "E810-C", VFs: 2}}}
	got := withManagementNIC(spec)
	if !slices.ContainsFunc(got.NICs, func(n virtualnode.NICSpec) bool { return n.DefaultRoute }) {
		t.Errorf("spec without a default route NIC: got NICs %+v, want the default spec's mgmt NIC", got.NICs)
	}
	if len(spec.NICs) != 0 {
		t.Errorf("withManagementNIC changed its argument: %+v", spec.NICs)
	}
	def := virtualnode.DefaultSpec()
	if got := withManagementNIC(def); len(got.NICs) != len(def.NICs) {
		t.Errorf("spec with a default route NIC: got %d NICs, want %d", len(got.NICs), len(def.NICs))
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cluster.json")
	st := &state{Name: "n", Netns: "hwnet-vn-n", CgroupRoot: cgroupRoot("n"), NodeIP: "10.255.0.2",
		Holder: &process{Name: "holder", PID: 7, StartTime: 9}}
	st.setProcess(&process{Name: kubelet, Argv: []string{"kubelet", "--v=1"}, PID: 8})
	st.setProcess(&process{Name: kubelet, Argv: []string{"kubelet", "--v=2"}, PID: 10})
	if err := st.write(path); err != nil {
		t.Fatal(err)
	}
	got, err := readState(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Processes) != 1 || got.process(kubelet).PID != 10 || got.Holder.StartTime != 9 || got.CgroupRoot != "/hwnet-e2e/n" {
		t.Errorf("state after a round trip: %+v", got)
	}
	for _, damaged := range []string{
		`{"name": ""}`,
		`{"name": "n", "cgroupRoot": "/", "netns": "hwnet-vn-n"}`,
		`{"name": "n", "cgroupRoot": "/hwnet-e2e/n", "netns": "other"}`,
		`{"name": `,
	} {
		if err := os.WriteFile(path, []byte(damaged), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readState(path); err == nil {
			t.Errorf("state %s: no error", damaged)
		}
	}
}

func testSettings(t *testing.T) settings {
	dir := t.TempDir()
	return settings{paths: paths{dir: dir}, name: "n", nodeIP: "10.255.0.2", kubeBinDir: "/bin",
		cgroupRoot: "/hwnet-e2e/n", sandboxImage: "hwnet.local/pause:e2e", podSubnet: "10.244.2.0/24"}
}

// TestKubeletConfig checks the settings this machine needs under the names
// kubelet.config.k8s.io/v1beta1 gives them (kubelet rejects unknown
// fields; TestUpRunPodDown runs it).
func TestKubeletConfig(t *testing.T) {
	s := testSettings(t)
	if err := s.writeKubeletConfig(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.configFile("kubelet.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kind: KubeletConfiguration", "failCgroupV1: false", "failSwapOn: false", "cgroupDriver: cgroupfs",
		"cgroupRoot: /hwnet-e2e/n", "imageGCHighThresholdPercent: 100", "memory.available: 1Mi",
		"clientCAFile: " + s.pkiFile("ca.crt"), "mode: Webhook",
		"containerRuntimeEndpoint: unix:///run/containerd/containerd.sock",
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("kubelet.yaml lacks %q:\n%s", want, data)
		}
	}
}

func TestPodNetwork(t *testing.T) {
	s := testSettings(t)
	if err := s.writePodNetwork(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(s.cniConf(), podNetworkFile))
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Plugins) != 1 || list.Plugins[0].Network.Type != "bridge" || !strings.Contains(string(data), `"10.244.2.0/24"`) {
		t.Errorf("pod network: %s", data)
	}
}

func TestContainerdConfig(t *testing.T) {
	s := testSettings(t)
	if err := s.writeContainerdConfig(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.configFile("containerd.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sandbox_image = "hwnet.local/pause:e2e"`, "restrict_oom_score_adj = true", "SystemdCgroup = false",
		"netns_mounts_under_state_dir = false", `snapshotter = "overlayfs"`,
		`bin_dir = "/opt/cni/bin"`, `conf_dir = "/etc/cni/net.d"`, `address = "/run/containerd/containerd.sock"`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("containerd.toml lacks %s:\n%s", want, data)
		}
	}
}

// TestContainerd2Config: containerd 2.x gets configuration version 3 with
// the same settings under the CRI runtime and images plugins, and the pod
// network is CNI 1.1.0, so that containerd calls STATUS through hwnet.
func TestContainerd2Config(t *testing.T) {
	s := testSettings(t)
	s.containerd, s.containerdVersion = filepath.Join(t.TempDir(), "containerd"), "v2.4.2"
	if err := errors.Join(s.writeContainerdConfig(), s.writePodNetwork()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.configFile("containerd.toml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"version = 3", `[plugins."io.containerd.cri.v1.images".pinned_images]`, `sandbox = "hwnet.local/pause:e2e"`,
		`[plugins."io.containerd.cri.v1.runtime"]`, "restrict_oom_score_adj = true", "SystemdCgroup = false",
		"netns_mounts_under_state_dir = false", `snapshotter = "overlayfs"`, `cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]`,
		`bin_dirs = ["/opt/cni/bin"]`, `conf_dir = "/etc/cni/net.d"`, `address = "/run/containerd/containerd.sock"`,
	} {
		if !strings.Contains(string(data), want) {
			t.Errorf("containerd.toml lacks %s:\n%s", want, data)
		}
	}
	if strings.Contains(string(data), "runtime_path") {
		t.Errorf("containerd.toml names a shim that is not beside containerd:\n%s", data)
	}
	list, err := os.ReadFile(filepath.Join(s.cniConf(), podNetworkFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(list), `"cniVersion": "1.1.0"`) {
		t.Errorf("pod network for containerd 2.x is not CNI 1.1.0: %s", list)
	}
}

func TestIsContainerd2(t *testing.T) {
	for version, want := range map[string]bool{"v2.4.2": true, "v3.0.0": true, "v1.7.35": false,
		"v1.6.20~ds1": false, "": false} {
		if got := isContainerd2(version); got != want {
			t.Errorf("isContainerd2(%q) = %v, want %v", version, got, want)
		}
	}
}

// TestContainerdVersion asks the containerd builds this machine has.
func TestContainerdVersion(t *testing.T) {
	for _, version := range []string{DefaultContainerdVersion, LegacyContainerdVersion} {
		bin := ContainerdBinary(version)
		if _, err := os.Stat(bin); err != nil {
			t.Logf("%s not built: %v", version, err)
			continue
		}
		got, err := containerdVersion(context.Background(), bin)
		if err != nil || got != version {
			t.Errorf("containerdVersion(%s) = %q, %v; want %s", bin, got, err, version)
		}
	}
}
