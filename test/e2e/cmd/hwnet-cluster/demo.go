package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/test/e2e"
	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

//go:embed cnf-pod.yaml
var cnfPod []byte

const (
	cnfPodName  = "cnf-demo"
	nadsFile    = "test/e2e/testdata/nads.yaml"
	statusKey   = "k8s.v1.cni.cncf.io/network-status"
	podWaitTime = 2 * time.Minute
)

// demo is `make demo`: the cluster up (or the running one), hwnet deployed
// from deploy/, the demo's networks and its CNF pod, then what hwnet made
// of them. The cluster keeps running.
func demo(ctx context.Context, o options) error {
	c, err := upCluster(ctx, o)
	if err != nil {
		return err
	}
	if _, err := e2e.DeployHwnet(ctx, c, o.repo, os.Stdout); err != nil {
		return fmt.Errorf("deploy hwnet: %w", err)
	}
	// ib-net's plugin: ib-sriov-cni cannot run here, hwnet's test plugin
	// answers as it does (see test/e2e/testdata/nads.yaml).
	if err := e2e.InstallCNIPlugin(ctx, c, filepath.Join(o.repo, "bin", "hwnet-test-plugin")); err != nil {
		return fmt.Errorf("install hwnet-test-plugin (make build builds it): %w", err)
	}
	if err := e2e.ApplyNADs(ctx, c, filepath.Join(o.repo, nadsFile)); err != nil {
		return fmt.Errorf("networks: %w", err)
	}
	if err := runCNFPod(ctx, c); err != nil {
		return err
	}
	return showDemo(ctx, c, o)
}

// runCNFPod replaces the demo pod left by an earlier run and waits for it.
func runCNFPod(ctx context.Context, c *cluster.Cluster) error {
	start := time.Now()
	if _, err := e2e.Kubectl(ctx, c, nil, "delete", "pod", cnfPodName, "--ignore-not-found", "--wait=true"); err != nil {
		return err
	}
	if _, err := e2e.Kubectl(ctx, c, cnfPod, "apply", "-f", "-"); err != nil {
		return err
	}
	_, err := e2e.Kubectl(ctx, c, nil, "wait", "--for=condition=Ready", fmt.Sprintf("--timeout=%s", podWaitTime), "pod/"+cnfPodName)
	if err != nil {
		events, _ := e2e.Kubectl(ctx, c, nil, "get", "events", "--field-selector", "involvedObject.name="+cnfPodName)
		return fmt.Errorf("pod %s not Ready: %w\n%s", cnfPodName, err, events)
	}
	fmt.Printf("demo: pod %s Running (%.1fs)\n", cnfPodName, time.Since(start).Seconds())
	return nil
}

func showDemo(ctx context.Context, c *cluster.Cluster, o options) error {
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		return err
	}
	hwnetctl := filepath.Join(repo, "bin", "hwnetctl")
	node, err := cnfNode(ctx, c)
	if err != nil {
		return err
	}
	if len(c.Nodes()) > 1 {
		if err := showCluster(ctx, c); err != nil {
			return err
		}
	}
	section("hwnetctl inventory, inside node " + node.NodeName() + " (the virtual SR-IOV hardware kubelet and hwnet-agent see)")
	if err := show(ctx, node, hwnetctl, "inventory"); err != nil {
		return err
	}
	section("pool capacities: node " + node.NodeName() + " allocatable, from hwnet-agent's device plugins")
	if err := showPools(ctx, c, node.NodeName()); err != nil {
		return err
	}
	section("pod " + cnfPodName + ": its networks annotation, as hwnet-agent fulfilled it (network-status)")
	if err := showNetworkStatus(ctx, c); err != nil {
		return err
	}
	section("pod " + cnfPodName + ": the devices kubelet gave its container (PCIDEVICE_* from `kubectl logs`)")
	logs, err := e2e.Kubectl(ctx, c, nil, "logs", cnfPodName)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.HasPrefix(line, "PCIDEVICE_") {
			fmt.Println(line)
		}
	}
	section("hwnetctl devices, in the agent pod: who holds each pooled device (pod " + cnfPodName + "'s container, its sandbox, claims) since when")
	agent, err := e2e.Kubectl(ctx, c, nil, "-n", e2e.AgentNamespace, "get", "pods", "-l", e2e.AgentSelector,
		"--field-selector", "spec.nodeName="+node.NodeName(), "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		return err
	}
	devices, err := e2e.Kubectl(ctx, c, nil, "-n", e2e.AgentNamespace, "exec", string(agent), "--",
		"hwnetctl", "devices", "--config", "/etc/hwnet/config.yaml")
	if err != nil {
		return err
	}
	fmt.Print(string(devices))
	usage(c)
	return nil
}

func section(title string) { fmt.Printf("\n== %s\n", title) }

func show(ctx context.Context, c *cluster.Cluster, name string, args ...string) error {
	cmd := c.Command(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// cnfNode is the node the scheduler put the demo pod on.
func cnfNode(ctx context.Context, c *cluster.Cluster) (*cluster.Cluster, error) {
	name, err := e2e.Kubectl(ctx, c, nil, "get", "pod", cnfPodName, "-o", "jsonpath={.spec.nodeName}")
	if err != nil {
		return nil, err
	}
	for _, n := range c.Nodes() {
		if n.NodeName() == string(name) {
			return n, nil
		}
	}
	return nil, fmt.Errorf("pod %s runs on %q, not a node of the cluster", cnfPodName, name)
}

// showCluster shows a cluster of several nodes: the nodes, and hwnet's
// pods on each.
func showCluster(ctx context.Context, c *cluster.Cluster) error {
	section("the cluster's nodes: each its own virtual node, kubelet and containerd; the last has no SR-IOV hardware")
	for _, args := range [][]string{{"get", "nodes", "-o", "wide"}, {"-n", e2e.AgentNamespace, "get", "pods", "-o", "wide"}} {
		out, err := e2e.Kubectl(ctx, c, nil, args...)
		if err != nil {
			return err
		}
		fmt.Print(string(out))
	}
	return nil
}

func showPools(ctx context.Context, c *cluster.Cluster, node string) error {
	out, err := e2e.Kubectl(ctx, c, nil, "get", "node", node, "-o", "jsonpath={.status.allocatable}")
	if err != nil {
		return err
	}
	var alloc map[string]string
	if err := json.Unmarshal(out, &alloc); err != nil {
		return fmt.Errorf("node allocatable %q: %w", out, err)
	}
	names := make([]string, 0, len(alloc))
	for name := range alloc {
		if strings.Contains(name, "/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	fmt.Printf("%-28s %s\n", "RESOURCE", "ALLOCATABLE")
	for _, name := range names {
		fmt.Printf("%-28s %s\n", name, alloc[name])
	}
	return nil
}

func showNetworkStatus(ctx context.Context, c *cluster.Cluster) error {
	out, err := e2e.Kubectl(ctx, c, nil, "get", "pod", cnfPodName, "-o", "jsonpath={.metadata.annotations}")
	if err != nil {
		return err
	}
	var annotations map[string]string
	if err := json.Unmarshal(out, &annotations); err != nil {
		return fmt.Errorf("pod annotations %q: %w", out, err)
	}
	value, ok := annotations[statusKey]
	if !ok {
		return fmt.Errorf("pod %s has no %s annotation", cnfPodName, statusKey)
	}
	fmt.Println(value)
	return nil
}

func usage(c *cluster.Cluster) {
	fmt.Printf(`
The cluster keeps running. Use it with:
  bin/hwnet-cluster --state-dir %[1]s kubectl -- get pods -A -o wide
  bin/hwnet-cluster --state-dir %[1]s kubectl -- get pod %[4]s -o yaml
  bin/hwnet-cluster --state-dir %[1]s exec -- COMMAND      (inside a node's mount and network namespaces: the control plane's, or --node NAME's)
  bin/hwnet-cluster --state-dir %[1]s status
Tear it down with:
  bin/hwnet-cluster --state-dir %[1]s down
Inside the namespaces KUBECONFIG=%[2]s; logs are in %[3]s.
`, c.StateDir(), c.Kubeconfig(), c.LogDir(), cnfPodName)
}
