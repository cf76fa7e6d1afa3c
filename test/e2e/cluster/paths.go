package cluster

import "path/filepath"

// paths are the files and directories of a cluster under its state
// directory. The same paths are valid inside the cluster's namespaces.
type paths struct {
	dir string
}

func (p paths) state() string      { return filepath.Join(p.dir, "cluster.json") }
func (p paths) node() string       { return filepath.Join(p.dir, "node") }
func (p paths) logs() string       { return filepath.Join(p.dir, "logs") }
func (p paths) bin() string        { return filepath.Join(p.dir, "bin") }
func (p paths) pki() string        { return filepath.Join(p.dir, "pki") }
func (p paths) config() string     { return filepath.Join(p.dir, "config") }
func (p paths) etcdData() string   { return filepath.Join(p.dir, "etcd") }
func (p paths) varLib() string     { return filepath.Join(p.dir, "var-lib") }
func (p paths) varLog() string     { return filepath.Join(p.dir, "var-log") }
func (p paths) cniConf() string    { return filepath.Join(p.dir, "cni", "net.d") }
func (p paths) cniBin() string     { return filepath.Join(p.dir, "cni", "bin") }
func (p paths) dev() string        { return filepath.Join(p.dir, "dev") }
func (p paths) sysStaging() string { return filepath.Join(p.dir, "sys") }

// worker is the state directory of the control plane's worker name.
func (p paths) worker(name string) paths { return paths{dir: filepath.Join(p.dir, "nodes", name)} }

// overlayUpper and overlayWork are the upper and work directories of the
// writable overlay Up lays over the host's dir (/dev, /etc, /opt).
func (p paths) overlayUpper(dir string) string {
	return filepath.Join(p.dir, "overlay", filepath.Base(dir), "upper")
}

func (p paths) overlayWork(dir string) string {
	return filepath.Join(p.dir, "overlay", filepath.Base(dir), "work")
}

// overlaid are the host directories the cluster sees through an overlay.
func overlaid() []string { return []string{"/dev", "/etc", "/opt"} }

func (p paths) log(component string) string {
	return filepath.Join(p.logs(), component+".log")
}

func (p paths) pkiFile(name string) string { return filepath.Join(p.pki(), name) }

func (p paths) kubeconfig(user string) string {
	return filepath.Join(p.config(), user+".kubeconfig")
}

// workerKubeconfig is the kubelet kubeconfig of worker name, made with the
// control plane's PKI.
func (p paths) workerKubeconfig(name string) string {
	return filepath.Join(p.config(), "kubelet-"+name+".kubeconfig")
}

func (p paths) configFile(name string) string { return filepath.Join(p.config(), name) }

// Paths inside the cluster's mount namespace.
const (
	containerdSocket = "/run/containerd/containerd.sock"
	cniConfDir       = "/etc/cni/net.d"
	cniBinDir        = "/opt/cni/bin"
	podNetworkFile   = "10-podnet.conflist"
)
