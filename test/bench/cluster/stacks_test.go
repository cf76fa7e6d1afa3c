package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/test/e2e"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
	"github.com/hwnet-io/hwnet/test/e2e/image"
)

// stack is one way of serving the same pods: up deploys it and returns
// once it serves the node's pools and its CNI configuration is in place,
// down removes every trace a later stack could trip on.
type stack struct {
	name string
	// daemons are the process names (comm) whose CPU and peak RSS are the
	// stack's.
	daemons []string
	up      func(ctx context.Context, be *bench) error
	down    func(ctx context.Context, be *bench) error
}

const (
	stackWait = 3 * time.Minute
	peerImage = "hwnet.local/peers:bench"
	draDriver = "hwnet.io"
	// pciIDs is the host's PCI ID database, for sriovdp's image.
	pciIDs = "/usr/share/misc/pci.ids"
	// multusConf is what multus-daemon writes with multusConfigFile auto.
	multusConf = "/etc/cni/net.d/00-multus.conf"
)

func (be *bench) stacks(names []string) ([]stack, error) {
	all := map[string]stack{
		"hwnet":     {name: "hwnet", daemons: []string{"hwnet-agent"}, up: upHwnet(false), down: removeHwnet},
		"hwnet-dra": {name: "hwnet-dra", daemons: []string{"hwnet-agent"}, up: upHwnet(true), down: removeHwnet},
		"peer":      {name: "peer", daemons: []string{"multus-daemon", "sriovdp"}, up: upPeer, down: removePeer},
	}
	var out []stack
	for _, n := range names {
		s, ok := all[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("-stacks: %q is not one of hwnet, hwnet-dra, peer", n)
		}
		out = append(out, s)
	}
	return out, nil
}

func stackNames(stacks []stack) []string {
	var out []string
	for _, s := range stacks {
		out = append(out, s.name)
	}
	return out
}

// upHwnet deploys hwnet as users do (e2e.DeployHwnet: deploy/ with
// deploy/pools.yaml and the dra component); with dra, it then turns every
// pool the bench's pods ask for (sriov_netdevice, sriov_dpdk, ib) to DRA
// mode, as test/e2e/dra_test.go does, so that the unchanged pods'
// extended resources are served through DRA by the DeviceClasses'
// extendedResourceName.
func upHwnet(dra bool) func(ctx context.Context, be *bench) error {
	return func(ctx context.Context, be *bench) error {
		if _, err := e2e.DeployHwnet(ctx, be.c, be.repo, os.Stdout); err != nil {
			return err
		}
		if !dra {
			return nil
		}
		return be.switchToDRA(ctx)
	}
}

// draPodPools are the pools of the bench's pods (cnfPod), all in DRA mode
// in the hwnet-dra stack: a pod mixing DRA-served extended resources with
// a device plugin's one crashes kubelet 1.37.1's device manager
// (docs/performance.md, bench-cluster).
var draPodPools = []string{"sriov_netdevice", "sriov_dpdk", "ib"}

// draPools is deploy/pools.yaml with draPodPools in DRA mode.
func draPools(repo string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(repo, e2e.PoolsFile))
	if err != nil {
		return nil, err
	}
	var out strings.Builder
	for line := range strings.Lines(string(data)) {
		out.WriteString(line)
		entry := strings.TrimSpace(line)
		for _, p := range draPodPools {
			if strings.HasPrefix(entry, "- resourceName: "+p+" ") {
				out.WriteString("    mode: dra\n")
			}
		}
	}
	return []byte(out.String()), nil
}

// switchToDRA puts the DRA pools into the agent's ConfigMap, replaces the
// agent pods and waits until the device plugin pools left every node and
// the ResourceSlices are published.
func (be *bench) switchToDRA(ctx context.Context) error {
	c := be.c
	config, err := draPools(be.repo)
	if err != nil {
		return err
	}
	client, err := e2e.Client(c)
	if err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(e2e.AgentNamespace)
	cm, err := cms.Get(ctx, "hwnet-pools", metav1.GetOptions{})
	if err != nil {
		return err
	}
	cm.Data = map[string]string{"config.yaml": string(config)}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if err := deletePodsAndWait(ctx, c, e2e.AgentNamespace, e2e.AgentSelector); err != nil {
		return err
	}
	for _, n := range c.Nodes() {
		want, err := e2e.ExpectedPools(ctx, n, config)
		if err != nil {
			return err
		}
		if err := e2e.WaitHwnetReady(ctx, n, want, os.Stdout); err != nil {
			return err
		}
	}
	return cluster.Poll(ctx, stackWait, "hwnet's ResourceSlices", func(ctx context.Context) error {
		n, err := sliceDevices(ctx, c)
		if want := draDevices * len(be.sriov); err == nil && n != want {
			err = fmt.Errorf("%d devices in hwnet.io's ResourceSlices, want %d", n, want)
		}
		return err
	})
}

// draDevices are testdata/node.yaml's sriov_netdevice (200), sriov_dpdk
// (112) and IB (100) VFs: those of each SR-IOV node.
const draDevices = 412

func sliceDevices(ctx context.Context, c *cluster.Cluster) (int, error) {
	client, err := e2e.Client(c)
	if err != nil {
		return 0, err
	}
	list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + draDriver})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range list.Items {
		n += len(s.Spec.Devices)
	}
	return n, nil
}

// deletePodsAndWait deletes the pods of a selector and waits until those
// pods are gone (their DaemonSet's replacements do not count).
func deletePodsAndWait(ctx context.Context, c *cluster.Cluster, ns, selector string) error {
	client, err := e2e.Client(c)
	if err != nil {
		return err
	}
	pods := client.CoreV1().Pods(ns)
	old, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return err
	}
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: selector}); err != nil {
		return err
	}
	return cluster.Poll(ctx, stackWait, "pods "+selector+" replaced", func(ctx context.Context) error {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		for _, p := range list.Items {
			for _, o := range old.Items {
				if p.UID == o.UID {
					return fmt.Errorf("%s still there", p.Name)
				}
			}
		}
		return nil
	})
}

// removeHwnet deletes the agent's DaemonSet, the controller and the
// admission policies (the peer stack runs without them), then what the
// agent leaves on the nodes: its CNI configuration and shim, and its
// ResourceSlices.
func removeHwnet(ctx context.Context, be *bench) error {
	c := be.c
	_, err := e2e.Kubectl(ctx, c, nil, "-n", e2e.AgentNamespace, "delete", "--ignore-not-found", "daemonset/hwnet-agent", "deployment/hwnet-controller")
	if err != nil {
		return err
	}
	if err := waitGone(ctx, c, e2e.AgentSelector); err != nil {
		return err
	}
	if err := waitGone(ctx, c, "app=hwnet-controller"); err != nil {
		return err
	}
	repo, err := e2e.RepoRoot()
	if err != nil {
		return err
	}
	for _, f := range []string{e2e.AgentAdmissionFile, e2e.ControllerAdmissionFile, e2e.AdmissionFile, e2e.DRAAdmissionFile,
		e2e.VFSettingsAdmissionFile, e2e.DRAVFSettingsAdmissionFile} {
		data, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			return err
		}
		if _, err := e2e.Kubectl(ctx, c, data, "delete", "--ignore-not-found", "-f", "-"); err != nil {
			return err
		}
	}
	if err := onEveryNode(ctx, c, "rm", "-f", e2e.ConfFile, "/opt/cni/bin/hwnet"); err != nil {
		return err
	}
	_, err = e2e.Kubectl(ctx, c, nil, "delete", "resourceslices", "--field-selector", "spec.driver="+draDriver)
	return err
}

// waitGone waits until no pod of the selector is left in kube-system.
func waitGone(ctx context.Context, c *cluster.Cluster, selector string) error {
	client, err := e2e.Client(c)
	if err != nil {
		return err
	}
	return cluster.Poll(ctx, stackWait, "pods "+selector+" gone", func(ctx context.Context) error {
		list, err := client.CoreV1().Pods(e2e.AgentNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err == nil && len(list.Items) > 0 {
			err = fmt.Errorf("%d pods left", len(list.Items))
		}
		return err
	})
}

// onEveryNode runs a command on every node of the cluster.
func onEveryNode(ctx context.Context, c *cluster.Cluster, name string, args ...string) error {
	for _, n := range c.Nodes() {
		if _, err := e2e.Exec(ctx, n, nil, name, args...); err != nil {
			return fmt.Errorf("node %s: %w", n.NodeName(), err)
		}
	}
	return nil
}

// upPeer deploys testdata/peers.yaml with sriovdp's configuration and
// waits until every SR-IOV node offers the pools sriovdp serves (the
// counts hwnet's deploy/pools.yaml gives) and multus-daemon has written
// its configuration on every node.
func upPeer(ctx context.Context, be *bench) error {
	c, repo := be.c, be.repo
	client, err := e2e.Client(c)
	if err != nil {
		return err
	}
	config, err := os.ReadFile("testdata/sriovdp-config.json")
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sriovdp-config", Namespace: e2e.AgentNamespace},
		Data: map[string]string{"config.json": string(config)}}
	cms := client.CoreV1().ConfigMaps(e2e.AgentNamespace)
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	manifest, err := os.ReadFile("testdata/peers.yaml")
	if err != nil {
		return err
	}
	if _, err := e2e.Kubectl(ctx, c, manifest, "apply", "-f", "-"); err != nil {
		return err
	}
	pools, err := os.ReadFile(filepath.Join(repo, e2e.PoolsFile))
	if err != nil {
		return err
	}
	want, err := e2e.ExpectedPools(ctx, be.sriov[0], pools)
	if err != nil {
		return err
	}
	return cluster.Poll(ctx, stackWait, "sriovdp's pools "+want.String()+" and "+multusConf, func(ctx context.Context) error {
		for _, n := range be.sriov {
			node, err := client.CoreV1().Nodes().Get(ctx, n.NodeName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			for name, count := range want {
				if q := node.Status.Allocatable[name]; q.Value() != count {
					return fmt.Errorf("node %s: allocatable %s is %d, want %d", node.Name, name, q.Value(), count)
				}
			}
		}
		return onEveryNode(ctx, c, "test", "-s", multusConf)
	})
}

// removePeer deletes the DaemonSets and what Multus leaves on the nodes.
func removePeer(ctx context.Context, be *bench) error {
	c := be.c
	manifest, err := os.ReadFile("testdata/peers.yaml")
	if err != nil {
		return err
	}
	if _, err := e2e.Kubectl(ctx, c, manifest, "delete", "--ignore-not-found", "-f", "-"); err != nil {
		return err
	}
	if _, err := e2e.Kubectl(ctx, c, nil, "-n", e2e.AgentNamespace, "delete", "--ignore-not-found", "configmap/sriovdp-config"); err != nil {
		return err
	}
	if err := waitGone(ctx, c, "app=multus"); err != nil {
		return err
	}
	if err := waitGone(ctx, c, "app=sriovdp"); err != nil {
		return err
	}
	return onEveryNode(ctx, c, "rm", "-rf", multusConf, "/etc/cni/net.d/multus.d", "/opt/cni/bin/multus-shim", "/opt/cni/bin/passthru")
}

// peerImageFile writes the peer stack's image (sriovdp, and Multus where
// its thick image has it) into dir and returns the tarball.
func peerImageFile(dir, sriovdpBin, multus string) (string, error) {
	exe := func(path, src string) image.File { return image.File{Path: path, Mode: 0o755, Source: src} }
	spec := image.Spec{Ref: peerImage, Env: []string{"PATH=/usr/bin:/bin"}, Entrypoint: []string{"/usr/bin/sriovdp"},
		Files: []image.File{exe("/usr/bin/sriovdp", sriovdpBin),
			// multus-daemon refuses to start unless user.Current() is root.
			{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n")},
			{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\n")},
			// sriovdp's ghw names devices from the PCI ID database, as the
			// hwdata package of its upstream image gives it.
			{Path: "/usr/share/misc/pci.ids", Mode: 0o644, Source: pciIDs}}}
	for _, b := range []string{"multus-daemon", "multus-shim", "install_multus", "passthru"} {
		spec.Files = append(spec.Files, exe("/usr/src/multus-cni/bin/"+b, filepath.Join(multus, b)))
	}
	for _, f := range spec.Files {
		if _, err := os.Stat(f.Source); f.Source != "" && err != nil {
			return "", fmt.Errorf("peer image: %w (test/bench/peers.sh builds Multus; /work/shared/peers has sriovdp)", err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "peers.tar")
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	err = image.Write(f, spec)
	return path, errors.Join(err, f.Close())
}

// buildTestPlugin builds hwnet-test-plugin (test/cniplugins/recorder),
// ib-net's delegate, static, into dir.
func buildTestPlugin(ctx context.Context, repo, dir string) (string, error) {
	out := filepath.Join(dir, "hwnet-test-plugin")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./test/cniplugins/recorder")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build hwnet-test-plugin: %w: %s", err, msg)
	}
	return out, nil
}
