package cluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

// Component names; each logs to StateDir/logs/NAME.log.
const (
	etcd              = "etcd"
	containerd        = "containerd"
	kubeAPIServer     = "kube-apiserver"
	controllerManager = "kube-controller-manager"
	scheduler         = "kube-scheduler"
	kubelet           = "kubelet"
	vnodeKernel       = "hwnet-vnode-kernel"
)

// daemons are the node's processes besides the holder, in start order:
// a worker runs only those of a node.
func (c *Cluster) daemons() []string {
	if c.st.worker() {
		return []string{vnodeKernel, containerd, kubelet}
	}
	return []string{vnodeKernel, etcd, containerd, kubeAPIServer, controllerManager, scheduler, kubelet}
}

// Endpoints inside the cluster's network namespace.
const (
	etcdClientURL  = "http://127.0.0.1:2379"
	etcdPeerURL    = "http://127.0.0.1:2380"
	kubeletHealthz = "127.0.0.1:10248"
	schedulerPort  = "127.0.0.1:10259"
)

// settings are what the components' arguments and configuration files
// are made from.
type settings struct {
	paths
	name, nodeIP, kubeBinDir, cgroupRoot, sandboxImage string
	// containerd is the containerd binary; "" is Debian's 1.6 from PATH,
	// which knows no CDI. containerdVersion is its version ("v2.4.2").
	containerd, containerdVersion string
	// podSubnet is the node's pod subnet, from which host-local assigns.
	podSubnet string
}

func (s settings) bin(name string) string { return filepath.Join(s.kubeBinDir, name) }

func (s settings) etcdArgv() []string {
	return []string{s.bin(etcd),
		"--name=" + s.name,
		"--data-dir=" + s.etcdData(),
		"--listen-client-urls=" + etcdClientURL,
		"--advertise-client-urls=" + etcdClientURL,
		"--listen-peer-urls=" + etcdPeerURL,
		"--initial-advertise-peer-urls=" + etcdPeerURL,
		"--initial-cluster=" + s.name + "=" + etcdPeerURL,
		// A test cluster does not need durability across a machine crash.
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

func (s settings) apiserverArgv() []string {
	return []string{s.bin(kubeAPIServer),
		"--etcd-servers=" + etcdClientURL,
		"--secure-port=" + strconv.Itoa(apiserverPort),
		"--advertise-address=" + s.nodeIP,
		"--cert-dir=" + s.pki(),
		"--client-ca-file=" + s.pkiFile("ca.crt"),
		"--tls-cert-file=" + s.pkiFile("apiserver.crt"),
		"--tls-private-key-file=" + s.pkiFile("apiserver.key"),
		"--service-account-key-file=" + s.pkiFile("service-account.key"),
		"--service-account-signing-key-file=" + s.pkiFile("service-account.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--allow-privileged=true",
		"--kubelet-client-certificate=" + s.pkiFile("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + s.pkiFile("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--profiling=false",
	}
}

func (s settings) controllerManagerArgv() []string {
	return []string{s.bin(controllerManager),
		"--kubeconfig=" + s.kubeconfig("admin"),
		"--authentication-kubeconfig=" + s.kubeconfig("admin"),
		"--authorization-kubeconfig=" + s.kubeconfig("admin"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--service-account-private-key-file=" + s.pkiFile("service-account.key"),
		"--root-ca-file=" + s.pkiFile("ca.crt"),
		"--cluster-name=" + s.name,
		"--profiling=false",
	}
}

func (s settings) schedulerArgv() []string {
	return []string{s.bin(scheduler),
		"--kubeconfig=" + s.kubeconfig("admin"),
		"--authentication-kubeconfig=" + s.kubeconfig("admin"),
		"--authorization-kubeconfig=" + s.kubeconfig("admin"),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--profiling=false",
	}
}

func (s settings) containerdArgv() []string {
	return []string{cmp.Or(s.containerd, containerd), "--config=" + s.configFile("containerd.toml")}
}

func (s settings) kubeletArgv() []string {
	return []string{s.bin(kubelet),
		"--config=" + s.configFile("kubelet.yaml"),
		"--kubeconfig=" + s.kubeconfig("kubelet"),
		"--node-ip=" + s.nodeIP,
		"--hostname-override=" + s.name,
	}
}

// containerdConfig is containerd 1.6's and 1.7's configuration (version
// 2) with the settings this machine needs: runc may not lower
// oom_score_adj (no CAP_SYS_RESOURCE in the bounding set), cgroup v1
// without systemd, and the CNI directories as the cluster's mount
// namespace has them. Pod network namespaces stay where containerd puts
// them by default, /var/run/netns (the cluster's own /run): hwnet-agent
// runs the delegate plugins in its container, which mounts /var/run/netns
// from the node, so a CNI_NETNS under containerd's state directory would
// not exist there.
const containerdConfig = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "{{.Socket}}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.SandboxImage}}"
  restrict_oom_score_adj = true
{{- if .CDI}}
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
{{- end}}
  netns_mounts_under_state_dir = false
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{.CNIBinDir}}"
    conf_dir = "{{.CNIConfDir}}"
`

// containerd2Config is the same for containerd 2.x (configuration version
// 3, where the CRI plugin is split into runtime and images plugins): CDI is
// always on there, and the runc shim is the one built with containerd
// when there is one, since Debian's is 1.6's.
const containerd2Config = `version = 3
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "{{.Socket}}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{{.SandboxImage}}"

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  netns_mounts_under_state_dir = false
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
{{- if .Shim}}
      runtime_path = "{{.Shim}}"
{{- end}}
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{{.CNIBinDir}}"]
    conf_dir = "{{.CNIConfDir}}"
`

// containerdTemplate is the configuration for the cluster's containerd.
func (s settings) containerdTemplate() string {
	if isContainerd2(s.containerdVersion) {
		return containerd2Config
	}
	return containerdConfig
}

func (s settings) writeContainerdConfig() error {
	tmpl, err := template.New("containerd.toml").Parse(s.containerdTemplate())
	if err != nil {
		return err
	}
	var b strings.Builder
	err = tmpl.Execute(&b, struct {
		Socket, SandboxImage, CNIBinDir, CNIConfDir, Shim string
		CDI                                               bool
	}{containerdSocket, s.sandboxImage, cniBinDir, cniConfDir, runcShim(s.containerd), s.containerd != ""})
	if err != nil {
		return err
	}
	return writeConfig(s.configFile("containerd.toml"), []byte(b.String()))
}

// kubeletConfig is the part of kubelet.config.k8s.io/v1beta1
// KubeletConfiguration the cluster sets.
type kubeletConfig struct {
	APIVersion                  string            `json:"apiVersion"`
	Kind                        string            `json:"kind"`
	FailCgroupV1                bool              `json:"failCgroupV1"`
	CgroupDriver                string            `json:"cgroupDriver"`
	CgroupRoot                  string            `json:"cgroupRoot"`
	FailSwapOn                  bool              `json:"failSwapOn"`
	EvictionHard                map[string]string `json:"evictionHard"`
	ImageGCHighThresholdPercent int               `json:"imageGCHighThresholdPercent"`
	ImageGCLowThresholdPercent  int               `json:"imageGCLowThresholdPercent"`
	ContainerRuntimeEndpoint    string            `json:"containerRuntimeEndpoint"`
	Authentication              kubeletAuthn      `json:"authentication"`
	Authorization               kubeletAuthz      `json:"authorization"`
	ReadOnlyPort                int               `json:"readOnlyPort"`
	HealthzBindAddress          string            `json:"healthzBindAddress"`
	ClusterDomain               string            `json:"clusterDomain"`
	SerializeImagePulls         bool              `json:"serializeImagePulls"`
	ResolvConf                  string            `json:"resolvConf"`
	NodeStatusUpdateFrequency   string            `json:"nodeStatusUpdateFrequency"`
	CrashLoopBackOff            crashLoopBackOff  `json:"crashLoopBackOff"`
}

// crashLoopBackOff bounds kubelet's restart back-off (KEP-5593, beta and
// on by default since 1.35).
type crashLoopBackOff struct {
	MaxContainerRestartPeriod string `json:"maxContainerRestartPeriod"`
}

type kubeletAuthn struct {
	X509      kubeletX509 `json:"x509"`
	Webhook   enabled     `json:"webhook"`
	Anonymous enabled     `json:"anonymous"`
}

type kubeletX509 struct {
	ClientCAFile string `json:"clientCAFile"`
}

type enabled struct {
	Enabled bool `json:"enabled"`
}

type kubeletAuthz struct {
	Mode string `json:"mode"`
}

func (s settings) writeKubeletConfig() error {
	cfg := kubeletConfig{
		APIVersion:   "kubelet.config.k8s.io/v1beta1",
		Kind:         "KubeletConfiguration",
		CgroupDriver: "cgroupfs",
		CgroupRoot:   s.cgroupRoot,
		// A test machine's disk and memory run low long before a real
		// node's would; eviction must not disturb the tests.
		EvictionHard: map[string]string{"memory.available": "1Mi", "nodefs.available": "1%",
			"nodefs.inodesFree": "1%", "imagefs.available": "1%", "imagefs.inodesFree": "1%"},
		// Images cannot be pulled again: never collect them.
		ImageGCHighThresholdPercent: 100,
		ImageGCLowThresholdPercent:  99,
		ContainerRuntimeEndpoint:    "unix://" + containerdSocket,
		Authentication: kubeletAuthn{X509: kubeletX509{ClientCAFile: s.pkiFile("ca.crt")},
			Webhook: enabled{Enabled: true}},
		Authorization:      kubeletAuthz{Mode: "Webhook"},
		HealthzBindAddress: "127.0.0.1",
		ClusterDomain:      "cluster.local",
		ResolvConf:         "/etc/resolv.conf",
		// A device plugin's pools show in the node's allocatable at
		// kubelet's next status update: every second rather than every 10.
		NodeStatusUpdateFrequency: "1s",
		// Fault tests kill hwnet-agent again and again (the SIGKILL-mid-ADD
		// soak): its restarts must not back off to kubelet's 5 minutes.
		CrashLoopBackOff: crashLoopBackOff{MaxContainerRestartPeriod: "2s"},
	}
	data, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	return writeConfig(s.configFile("kubelet.yaml"), data)
}

// conflist is a CNI network configuration list.
type conflist struct {
	CNIVersion string         `json:"cniVersion"`
	Name       string         `json:"name"`
	Plugins    []bridgeConfig `json:"plugins"`
}

type bridgeConfig struct {
	Type             string          `json:"type"`
	Bridge           string          `json:"bridge"`
	IsDefaultGateway bool            `json:"isDefaultGateway"`
	HairpinMode      bool            `json:"hairpinMode"`
	IPAM             hostLocalConfig `json:"ipam"`
}

type hostLocalConfig struct {
	Type   string      `json:"type"`
	Ranges [][]ipRange `json:"ranges"`
}

type ipRange struct {
	Subnet string `json:"subnet"`
}

// podNetworkVersion is the default pod network's CNI version: 1.1.0 for
// containerd 2.x, which calls STATUS (CNI 1.1) through hwnet's list, made
// in the default network's version, for the node's network readiness;
// 1.0.0 for 1.x, whose libcni knows no 1.1.0.
func (s settings) podNetworkVersion() string {
	if isContainerd2(s.containerdVersion) {
		return "1.1.0"
	}
	return "1.0.0"
}

// writePodNetwork writes the default pod network: the bridge cni0 with the
// node side as the pods' gateway, addresses from host-local.
func (s settings) writePodNetwork() error {
	list := conflist{CNIVersion: s.podNetworkVersion(), Name: "podnet", Plugins: []bridgeConfig{{
		Type: "bridge", Bridge: "cni0", IsDefaultGateway: true, HairpinMode: true,
		IPAM: hostLocalConfig{Type: "host-local", Ranges: [][]ipRange{{{Subnet: s.podSubnet}}}},
	}}}
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	return writeConfig(filepath.Join(s.cniConf(), podNetworkFile), append(data, '\n'))
}

func writeConfig(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
