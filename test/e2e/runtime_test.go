package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// agentSocket is the agent's CNI socket in the cluster's namespaces
// (cni/pluginconf's DefaultSocketPath, as deploy/ mounts it).
const agentSocket = "/run/hwnet/cni.sock"

// TestRuntimeNetworkReadyIsHwnetStatus: containerd 2.x answers kubelet's
// runtime Status with CNI STATUS (CNI 1.1) of the network it runs, which
// is hwnet's list, so the node's network readiness is hwnet's answer: with
// the agent's CNI socket gone the node turns NotReady with the shim's words
// ("hwnet-agent is not reachable"), and Ready again once the socket is
// back and the agent answers STATUS. (The agent logs STATUS, every 5 s,
// at Debug only.) containerd 1.x calls no STATUS.
// (No containerd release calls CNI GC yet: go-cni has no GC.)
func TestRuntimeNetworkReadyIsHwnetStatus(t *testing.T) {
	e := setup(t)
	if !e.c.CNIStatusByRuntime() {
		// skip-ok: CI runs containerd 2.x, which calls STATUS; 1.x is selectable by hand
		t.Skipf("containerd %s calls no CNI STATUS", e.c.ContainerdVersion())
	}
	ctx := testContext(t)
	hidden := agentSocket + ".hidden-by-e2e"
	if _, err := Exec(ctx, e.c, nil, "mv", agentSocket, hidden); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func(ctx context.Context) error {
		if restored {
			return nil
		}
		restored = true
		// A restarted agent made a socket of its own: keep that one.
		_, err := Exec(ctx, e.c, nil, "sh", "-c", fmt.Sprintf("if [ -e %[1]s ]; then rm -f %[2]s; else mv %[2]s %[1]s; fi", agentSocket, hidden))
		return err
	}
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Error(err)
		}
	})
	e.waitNodeReady(ctx, t, corev1.ConditionFalse, "hwnet-agent is not reachable")
	if err := restore(ctx); err != nil {
		t.Fatal(err)
	}
	e.waitNodeReady(ctx, t, corev1.ConditionTrue, "")
	mustPoll(ctx, t, "the node's not-ready taints gone and hwnet-agent Ready", func(ctx context.Context) error {
		if err := e.noNotReadyTaint(ctx); err != nil {
			return err
		}
		_, err := runningAgent(ctx, e.client, e.c.NodeName())
		return err
	})
}

// waitNodeReady waits until the node's Ready condition has status and its
// message contains msg.
func (e *env) waitNodeReady(ctx context.Context, t *testing.T, status corev1.ConditionStatus, msg string) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("node Ready=%s with %q", status, msg), func(ctx context.Context) error {
		node, err := e.client.CoreV1().Nodes().Get(ctx, e.c.NodeName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == status && strings.Contains(c.Message, msg) {
				t.Logf("node Ready=%s: %s", c.Status, c.Message)
				return nil
			}
			if c.Type == corev1.NodeReady {
				return fmt.Errorf("node Ready=%s: %s", c.Status, c.Message)
			}
		}
		return fmt.Errorf("node has no Ready condition")
	})
}

// noNotReadyTaint is nil once the node lifecycle controller has taken its
// not-ready taints off the node.
func (e *env) noNotReadyTaint(ctx context.Context) error {
	node, err := e.client.CoreV1().Nodes().Get(ctx, e.c.NodeName(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady {
			return fmt.Errorf("node still tainted %s:%s", taint.Key, taint.Effect)
		}
	}
	return nil
}
