package cluster

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/cniplugins"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// KubeVersion is the Kubernetes release whose cached binaries Up runs by
// default: the one test/kubeapi/build-kube.sh builds for every test.
const KubeVersion = kubeapi.KubeVersion

// CNIPluginsVersion is the version of the reference CNI plugins the
// cluster runs: the one hwnet's tests build.
const CNIPluginsVersion = cniplugins.Version

// Defaults of Config's fields.
const (
	DefaultStateDir     = "/var/lib/hwnet-e2e"
	DefaultSandboxImage = "hwnet.local/pause:e2e"
	// DefaultNodeName names the node, and the virtual node built for it,
	// when Config.Spec is nil.
	DefaultNodeName = "hwnet-e2e"
	// DefaultImageDir is where hwnet-cluster and this package's tests
	// build the images (test/e2e/image), so that later runs reuse them.
	DefaultImageDir = "/var/cache/hwnet-ci/e2e-images"
	// ImageDirEnv overrides DefaultImageDir for the tests, so that two
	// checkouts testing at once do not import each other's images.
	ImageDirEnv = "HWNET_E2E_IMAGE_DIR"
)

// TestImageDir is where tests build the images: $HWNET_E2E_IMAGE_DIR,
// else DefaultImageDir.
func TestImageDir() string {
	if dir := os.Getenv(ImageDirEnv); dir != "" {
		return dir
	}
	return DefaultImageDir
}

// Config says how Up builds a cluster. The zero value is usable once the
// images are given.
type Config struct {
	// StateDir holds everything the cluster has on the host; Down removes
	// it. Default DefaultStateDir.
	StateDir string
	// KubeBinDir has etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler, kubelet and kubectl. Default $HWNET_KUBE_CACHE, else
	// /var/cache/hwnet-ci/kube/KubeVersion/bin.
	KubeBinDir string
	// CNIBinDir has the reference CNI plugins; Up installs them there with
	// test/install-cni-plugins.sh when they are missing. Default
	// $HWNET_CNI_BIN_CACHE, else /var/cache/hwnet-ci/cni-bin/CNIPluginsVersion.
	CNIBinDir string
	// Repo is the hwnet repository, for test/install-cni-plugins.sh.
	// Default: the directory holding go.mod above the working directory.
	Repo string
	// Spec is the virtual node; its name is the Kubernetes node's name.
	// Default virtualnode.DefaultSpec() named DefaultNodeName. A spec
	// without a NIC holding the default route gets the default spec's.
	Spec *virtualnode.Spec
	// Workers are the virtual nodes of the cluster's other nodes, each
	// with its own kubelet, containerd and kernel emulation; the node of
	// Spec is the control plane. None (the default) is a one-node
	// cluster. WorkerSpecs makes the usual ones.
	Workers []*virtualnode.Spec
	// Images are docker-archive tarballs imported into containerd's k8s.io
	// namespace, also when Up finds the cluster already running.
	Images []string
	// SandboxImage is containerd's sandbox_image, one of Images. Default
	// DefaultSandboxImage.
	SandboxImage string
	// Containerd is the containerd binary. Default $HWNET_CONTAINERD, else
	// the release ContainerdVersion built by `make containerd-cdi`, else,
	// when the default release is not built, Debian's 1.6 from PATH, which
	// reads no CDI specs (DRA drivers' devices need them).
	Containerd string
	// ContainerdVersion picks a release built by `make containerd-cdi`
	// (ContainerdBinary) when Containerd is empty. Default
	// $HWNET_E2E_CONTAINERD, else DefaultContainerdVersion.
	ContainerdVersion string
	// Progress receives one line per step with its duration; nil discards.
	Progress io.Writer
}

// withDefaults returns a copy of cfg with every empty field defaulted.
func (cfg Config) withDefaults() (Config, error) {
	cfg.StateDir = cmp.Or(cfg.StateDir, DefaultStateDir)
	cfg.KubeBinDir = cmp.Or(cfg.KubeBinDir, os.Getenv("HWNET_KUBE_CACHE"),
		filepath.Join("/var/cache/hwnet-ci/kube", KubeVersion, "bin"))
	cfg.CNIBinDir = cmp.Or(cfg.CNIBinDir, os.Getenv("HWNET_CNI_BIN_CACHE"),
		filepath.Join("/var/cache/hwnet-ci/cni-bin", CNIPluginsVersion))
	cfg.SandboxImage = cmp.Or(cfg.SandboxImage, DefaultSandboxImage)
	if cfg.Containerd == "" {
		var err error
		if cfg.Containerd, err = defaultContainerd(cfg.ContainerdVersion); err != nil {
			return cfg, err
		}
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Spec == nil {
		cfg.Spec = virtualnode.DefaultSpec()
		cfg.Spec.Name = DefaultNodeName
	}
	cfg.Spec = withManagementNIC(cfg.Spec)
	if err := checkWorkers(cfg.Spec, cfg.Workers); err != nil {
		return cfg, err
	}
	cfg.Workers = slices.Clone(cfg.Workers)
	for i, spec := range cfg.Workers {
		cfg.Workers[i] = withManagementNIC(spec)
	}
	for _, dir := range []*string{&cfg.StateDir, &cfg.KubeBinDir, &cfg.CNIBinDir} {
		abs, err := filepath.Abs(*dir)
		if err != nil {
			return cfg, err
		}
		*dir = abs
	}
	if cfg.StateDir == "/" {
		return cfg, fmt.Errorf("cluster: StateDir %q: Down removes it, so it cannot be /", cfg.StateDir)
	}
	return cfg, cfg.Spec.Validate()
}

// withManagementNIC returns spec, or a copy with the default spec's
// management NIC when no NIC of spec holds the default route: the node IP
// is that NIC's address.
func withManagementNIC(spec *virtualnode.Spec) *virtualnode.Spec {
	if slices.ContainsFunc(spec.NICs, func(n virtualnode.NICSpec) bool { return n.DefaultRoute }) {
		return spec
	}
	out := *spec
	out.NICs = slices.Clone(spec.NICs)
	for _, n := range virtualnode.DefaultSpec().NICs {
		if n.DefaultRoute {
			out.NICs = append(out.NICs, n)
		}
	}
	return &out
}

// checkWorkers refuses workers that would not fit the fabric or whose
// names, which name their namespaces and cgroups too, are not unique.
func checkWorkers(cp *virtualnode.Spec, workers []*virtualnode.Spec) error {
	if len(workers)+1 > maxNodes {
		return fmt.Errorf("cluster: %d nodes: at most %d", len(workers)+1, maxNodes)
	}
	seen := map[string]bool{cp.Name: true}
	for i, spec := range workers {
		if spec == nil {
			return fmt.Errorf("cluster: workers[%d]: no spec", i)
		}
		if err := spec.Validate(); err != nil {
			return fmt.Errorf("cluster: workers[%d]: %w", i, err)
		}
		if seen[spec.Name] {
			return fmt.Errorf("cluster: workers[%d]: node name %q is taken", i, spec.Name)
		}
		seen[spec.Name] = true
	}
	return nil
}

// WorkerSpecs are the virtual nodes of a cluster of n nodes whose control
// plane is named cpName: workers named cpName-w1, cpName-w2 and so on,
// each with the default SR-IOV hardware, except that the last of three or
// more nodes has none at all (only its management NIC): a node where
// hwnet's pools are empty and its CNI side still attaches pods.
func WorkerSpecs(cpName string, n int) []*virtualnode.Spec {
	var specs []*virtualnode.Spec
	for i := 1; i < n; i++ {
		spec := virtualnode.DefaultSpec()
		if n >= 3 && i == n-1 {
			spec = &virtualnode.Spec{}
		}
		spec.Name = fmt.Sprintf("%s-w%d", cpName, i)
		specs = append(specs, spec)
	}
	return specs
}
