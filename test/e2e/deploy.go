// Package e2e is hwnet's end-to-end suite: hwnet deployed from deploy/ on
// a real single-node Kubernetes with virtual SR-IOV hardware
// (test/e2e/cluster), and pods that use its networks. Its exported helpers
// deploy hwnet the way users do; `make demo` reuses them.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// Files of the hwnet repository that DeployHwnet and ApplyNADs read.
const (
	CRDDir    = "deploy/crds"
	AgentFile = "deploy/hwnet-agent.yaml"
	// AgentAdmissionFile limits the agent's pod patches to its own node.
	AgentAdmissionFile = "deploy/hwnet-agent-admission.yaml"
	// ControllerFile and AdmissionFile are the KEP-3698 multi-network
	// API's controller and pod admission policies;
	// ControllerAdmissionFile limits the controller's writes.
	ControllerFile          = "deploy/hwnet-controller.yaml"
	ControllerAdmissionFile = "deploy/hwnet-controller-admission.yaml"
	AdmissionFile           = "deploy/multinetwork/admission.yaml"
	// The admission policies holding NADs and claims to the VF settings
	// policy, and the policy itself: the clusters' admin's
	// (VFSettingsPolicyFile, which lets namespace default set its pods'
	// MACs) in place of deploy/hwnet-vf-settings-policy.yaml, which lets
	// no namespace set anything, as the pools are the admin's in place of
	// deploy/'s example.
	VFSettingsPolicyFile       = "test/e2e/testdata/vf-settings-policy.yaml"
	VFSettingsAdmissionFile    = "deploy/hwnet-vf-settings-admission.yaml"
	DRAVFSettingsAdmissionFile = "deploy/dra/vf-settings-admission.yaml"
	// The dra component (deploy/dra/kustomization.yaml): the DeviceClasses
	// of hwnet's DRA driver, its RBAC, its ResourceSlice policy and the
	// patch of the agent's DaemonSet that turns it on.
	DRAClassesFile   = "deploy/dra/deviceclasses.yaml"
	DRARBACFile      = "deploy/dra/rbac.yaml"
	DRAAdmissionFile = "deploy/dra/admission.yaml"
	DRAAgentPatch    = "deploy/dra/agent-args.yaml"
	PoolsFile        = "deploy/pools.yaml"
	NADsFile         = "test/e2e/testdata/nads.yaml"
	poolsMap         = "hwnet-pools"
	poolsKey         = "config.yaml"
	cniBinDir        = "/opt/cni/bin"
	deployWait       = 2 * time.Minute
	logTailLines     = 40
)

// Where hwnet-agent runs and what it writes, as deploy/hwnet-agent.yaml
// has it.
const (
	AgentNamespace = "kube-system"
	AgentSelector  = "app=hwnet-agent"
	// ConfFile is hwnet's CNI configuration inside the cluster's
	// namespaces: the runtime uses hwnet once it exists.
	ConfFile = "/etc/cni/net.d/00-hwnet.conflist"
)

// Pools maps each pool's resource name (e.g. intel.com/sriov_netdevice) to
// the number of devices the node offers.
type Pools map[corev1.ResourceName]int64

// String lists the pools sorted by name, as "name=count" pairs.
func (p Pools) String() string {
	names := make([]string, 0, len(p))
	for name, n := range p {
		names = append(names, fmt.Sprintf("%s=%d", name, n))
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// DeployHwnet deploys hwnet on c as a user does, from repo's deploy/
// directory: it installs the CRDs of deploy/crds, applies
// deploy/hwnet-agent.yaml with its hwnet-pools ConfigMap carrying
// deploy/pools.yaml, hwnet-controller, the admission policies and the
// VF settings policy of VFSettingsPolicyFile. It
// returns once hwnet is ready on every node (see WaitHwnetReady), with the
// pools the control plane's node offers. Progress lines go to progress
// (nil discards them).
func DeployHwnet(ctx context.Context, c *cluster.Cluster, repo string, progress io.Writer) (Pools, error) {
	start := time.Now()
	crds, err := readManifests(repo, CRDDir)
	if err != nil {
		return nil, err
	}
	if _, err := Kubectl(ctx, c, crds, "apply", "-f", "-"); err != nil {
		return nil, err
	}
	if _, err := Kubectl(ctx, c, crds, "wait", "--for=condition=Established", "--timeout=60s", "-f", "-"); err != nil {
		return nil, err
	}
	manifest, err := agentManifest(repo)
	if err != nil {
		return nil, err
	}
	if _, err := Kubectl(ctx, c, manifest, "apply", "-f", "-"); err != nil {
		return nil, err
	}
	rest, err := readManifests(repo, AgentAdmissionFile, ControllerFile, ControllerAdmissionFile, AdmissionFile,
		VFSettingsPolicyFile, VFSettingsAdmissionFile, DRAClassesFile, DRARBACFile, DRAAdmissionFile, DRAVFSettingsAdmissionFile)
	if err != nil {
		return nil, err
	}
	if _, err := Kubectl(ctx, c, rest, "apply", "-f", "-"); err != nil {
		return nil, err
	}
	progressf(progress, "hwnet: CRDs installed, %s applied with %s and the dra component, %s and the admission policies (%.1fs)",
		AgentFile, PoolsFile, ControllerFile, time.Since(start).Seconds())
	poolsConfig, err := os.ReadFile(filepath.Join(repo, PoolsFile))
	if err != nil {
		return nil, err
	}
	var cpPools Pools
	for i, n := range c.Nodes() {
		want, err := ExpectedPools(ctx, n, poolsConfig)
		if err != nil {
			return nil, err
		}
		if err := WaitHwnetReady(ctx, n, want, progress); err != nil {
			return nil, err
		}
		if i == 0 {
			cpPools = want
		}
	}
	return cpPools, nil
}

// readManifests joins the YAML files, and those of directories, under repo
// into one stream for kubectl's standard input.
func readManifests(repo string, paths ...string) ([]byte, error) {
	var files []string
	for _, p := range paths {
		matches, err := filepath.Glob(filepath.Join(repo, p, "*.yaml"))
		if err != nil {
			return nil, err
		}
		if len(matches) == 0 {
			matches = []string{filepath.Join(repo, p)}
		}
		files = append(files, matches...)
	}
	var out []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(append(out, "\n---\n"...), data...)
	}
	return out, nil
}

// agentManifest is deploy/hwnet-agent.yaml with the hwnet-pools
// ConfigMap's config.yaml replaced by deploy/pools.yaml and the DaemonSet
// patched by the dra component (DRAAgentPatch), as `kubectl kustomize
// deploy/` renders it.
func agentManifest(repo string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(repo, AgentFile))
	if err != nil {
		return nil, err
	}
	poolsConfig, err := os.ReadFile(filepath.Join(repo, PoolsFile))
	if err != nil {
		return nil, err
	}
	patch, err := draPatch(repo)
	if err != nil {
		return nil, err
	}
	docs := strings.Split(string(data), "\n---\n")
	configMaps := 0
	for i, doc := range docs {
		var obj metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			return nil, fmt.Errorf("%s document %d: %w", AgentFile, i, err)
		}
		switch obj.Kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.Unmarshal([]byte(doc), &cm); err != nil {
				return nil, fmt.Errorf("%s document %d: %w", AgentFile, i, err)
			}
			if cm.Name != poolsMap {
				continue
			}
			cm.Data = map[string]string{poolsKey: string(poolsConfig)}
			out, err := yaml.Marshal(&cm)
			if err != nil {
				return nil, err
			}
			docs[i] = string(out)
			configMaps++
		case "DaemonSet":
			js, err := yaml.YAMLToJSON([]byte(doc))
			if err != nil {
				return nil, fmt.Errorf("%s document %d: %w", AgentFile, i, err)
			}
			if js, err = patch.Apply(js); err != nil {
				return nil, fmt.Errorf("%s on %s document %d: %w", DRAAgentPatch, AgentFile, i, err)
			}
			out, err := yaml.JSONToYAML(js)
			if err != nil {
				return nil, err
			}
			docs[i] = string(out)
		}
	}
	if configMaps != 1 {
		return nil, fmt.Errorf("%s has %d ConfigMaps %q, want 1", AgentFile, configMaps, poolsMap)
	}
	return []byte(strings.Join(docs, "\n---\n")), nil
}

// draPatch is the dra component's JSON patch of the agent's DaemonSet.
func draPatch(repo string) (jsonpatch.Patch, error) {
	data, err := os.ReadFile(filepath.Join(repo, DRAAgentPatch))
	if err != nil {
		return nil, err
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DRAAgentPatch, err)
	}
	patch, err := jsonpatch.DecodePatch(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DRAAgentPatch, err)
	}
	return patch, nil
}

// ExpectedPools is how hwnet divides the cluster's virtual node among the
// device plugin pools of a pools configuration: what the node's
// allocatable must show. Pools in DRA mode are in ResourceSlices instead.
func ExpectedPools(ctx context.Context, c *cluster.Cluster, poolsConfig []byte) (Pools, error) {
	node := c.Node()
	if node == nil {
		return nil, fmt.Errorf("cluster in %s has lost its virtual node", c.StateDir())
	}
	cfg, err := pools.Parse(poolsConfig)
	if err != nil {
		return nil, err
	}
	db, err := hwdb.Open()
	if err != nil {
		return nil, err
	}
	inv, err := discovery.Discover(ctx, discovery.Options{SysfsRoot: node.SysRoot(), DevRoot: node.DevRoot(),
		Netns: path.Join("/run/netns", node.NetnsName()), DB: db})
	if err != nil {
		return nil, fmt.Errorf("discover the virtual node: %w", err)
	}
	want := Pools{}
	for _, p := range cfg.Match(inv).Pools {
		if p.Resource.Mode == pools.DRA {
			continue
		}
		want[corev1.ResourceName(p.Resource.FullName())] = int64(len(p.Devices))
	}
	return want, nil
}

// WaitHwnetReady waits until an hwnet-agent pod runs on c's node, the
// node's allocatable shows want, and hwnet's CNI configuration exists:
// after a deployment, or after kubelet or the agent restarted.
func WaitHwnetReady(ctx context.Context, c *cluster.Cluster, want Pools, progress io.Writer) error {
	client, err := Client(c)
	if err != nil {
		return err
	}
	start := time.Now()
	var agent string
	err = cluster.Poll(ctx, deployWait, "an hwnet-agent pod Running and Ready on node "+c.NodeName(), func(ctx context.Context) (err error) {
		agent, err = runningAgent(ctx, client, c.NodeName())
		return err
	})
	if err != nil {
		return fmt.Errorf("%w; see `kubectl -n %s describe ds/hwnet-agent` and kubelet's log in %s%s",
			err, AgentNamespace, c.LogDir(), agentLogTail(ctx, client, c.NodeName()))
	}
	progressf(progress, "hwnet: agent pod %s Running (%.1fs)", agent, time.Since(start).Seconds())
	err = cluster.Poll(ctx, deployWait, "node allocatable "+want.String(), func(ctx context.Context) error {
		return checkAllocatable(ctx, client, c.NodeName(), want)
	})
	if err != nil {
		return fmt.Errorf("%w; see `kubectl -n %s logs %s`", err, AgentNamespace, agent)
	}
	progressf(progress, "hwnet: node %s offers %s (%.1fs)", c.NodeName(), want, time.Since(start).Seconds())
	err = cluster.Poll(ctx, deployWait, ConfFile+" in the cluster's namespaces", func(ctx context.Context) error {
		_, err := Exec(ctx, c, nil, "test", "-s", ConfFile)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w; see `kubectl -n %s logs %s`", err, AgentNamespace, agent)
	}
	progressf(progress, "hwnet: %s written (%.1fs)", ConfFile, time.Since(start).Seconds())
	return nil
}

// agentPods are the hwnet-agent pods on node.
func agentPods(ctx context.Context, client kubernetes.Interface, node string) (*corev1.PodList, error) {
	return client.CoreV1().Pods(AgentNamespace).List(ctx, metav1.ListOptions{
		LabelSelector: AgentSelector, FieldSelector: "spec.nodeName=" + node})
}

// runningAgent names the hwnet-agent pod that runs and is ready on node.
func runningAgent(ctx context.Context, client kubernetes.Interface, node string) (string, error) {
	pods, err := agentPods(ctx, client, node)
	if err != nil {
		return "", err
	}
	var seen []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
			return p.Name, nil
		}
		seen = append(seen, fmt.Sprintf("%s is %s", p.Name, p.Status.Phase))
	}
	return "", fmt.Errorf("no hwnet-agent pod is Running and Ready (%s)", strings.Join(seen, ", "))
}

// agentLogTail is the end of the log of each hwnet-agent pod on node, for
// an error that a pod did not get ready: the agent logs why (its /readyz
// answer), kubelet's probe event only the status code.
func agentLogTail(ctx context.Context, client kubernetes.Interface, node string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	pods, err := agentPods(ctx, client, node)
	if err != nil {
		return fmt.Sprintf("\n(listing the agent pods for their logs: %v)", err)
	}
	var b strings.Builder
	tail := int64(logTailLines)
	for _, p := range pods.Items {
		raw, err := client.CoreV1().Pods(AgentNamespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tail}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "\n(%s's log: %v)", p.Name, err)
			continue
		}
		fmt.Fprintf(&b, "\nthe last %d lines of %s's log:\n%s", tail, p.Name, raw)
	}
	return b.String()
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// checkAllocatable compares the node's allocatable with want; a pool of
// no devices may also be absent.
func checkAllocatable(ctx context.Context, client kubernetes.Interface, nodeName string, want Pools) error {
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got := Pools{}
	for name := range want {
		if q, ok := node.Status.Allocatable[name]; ok {
			got[name] = q.Value()
		}
	}
	for name, n := range want {
		if got[name] != n {
			return fmt.Errorf("node %s allocatable has %s", nodeName, got)
		}
	}
	return nil
}

// ApplyNADs applies the NetworkAttachmentDefinitions of a manifest file
// (e.g. the repository's NADsFile) with kubectl.
func ApplyNADs(ctx context.Context, c *cluster.Cluster, file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	_, err = Kubectl(ctx, c, data, "apply", "-f", "-")
	return err
}

// InstallCNIPlugin copies a CNI plugin binary from the host into every
// node's /opt/cni/bin under its own name, replacing it atomically, for
// NADs whose plugin the cluster lacks (NADsFile's ib-net uses
// hwnet-test-plugin, built from test/cniplugins/recorder with
// CGO_ENABLED=0, since hwnet-agent's image has no C library).
func InstallCNIPlugin(ctx context.Context, c *cluster.Cluster, binary string) error {
	data, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	dst := path.Join(cniBinDir, filepath.Base(binary))
	for _, n := range c.Nodes() {
		_, err = Exec(ctx, n, data, "sh", "-c", `cat >"$1.tmp" && chmod 0755 "$1.tmp" && mv -f "$1.tmp" "$1"`, "sh", dst)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName(), err)
		}
	}
	return nil
}

// Kubectl runs kubectl with args inside c's namespaces as the cluster's
// admin, with stdin as its standard input, and returns its standard
// output. Paths in args are resolved inside the namespaces, where the
// working directory is /: pass manifests on stdin with "-f -".
func Kubectl(ctx context.Context, c *cluster.Cluster, stdin []byte, args ...string) ([]byte, error) {
	return Exec(ctx, c, stdin, "kubectl", args...)
}

// Exec runs a command inside c's mount and network namespaces and returns
// its standard output; its error quotes the standard error.
func Exec(ctx context.Context, c *cluster.Cluster, stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := c.Command(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// Client is a Kubernetes client of c's API server, usable from the host.
func Client(c *cluster.Cluster) (kubernetes.Interface, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

func progressf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// RepoRoot is the directory holding go.mod above the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
