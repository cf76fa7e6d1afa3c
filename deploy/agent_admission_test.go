package deploy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// agentClient is a client with the token kubelet gives hwnet-agent's pod
// on node: bound to the pod, so it names the node.
func agentClient(t *testing.T, api *kubeapi.Server, node string) kubernetes.Interface {
	t.Helper()
	return kubernetes.NewForConfigOrDie(saClient(t, api, "hwnet-agent", node))
}

func ensureNamespace(t *testing.T, client kubernetes.Interface, name string) {
	t.Helper()
	_, err := client.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// TestAgentPatchesOnlyItsOwnNodesPods: with deploy/'s RBAC the agent's
// service account may patch any pod; the admission policy leaves it the
// network-status annotations of pods on its own node, and nothing else.
func TestAgentPatchesOnlyItsOwnNodesPods(t *testing.T) {
	api := kubeapi.Start(t)
	admin := api.Client()
	ensureNamespace(t, admin, "kube-system")
	api.ApplyFile(t, "hwnet-agent.yaml")
	api.ApplyFile(t, "hwnet-agent-admission.yaml")
	ctx := context.Background()
	for name, node := range map[string]string{"pod-a": "node-a", "pod-b": "node-b"} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "cnf"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "cnf"}}}}
		if _, err := admin.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	agent := agentClient(t, api, "node-a")
	patch := func(client kubernetes.Interface, pod, body string) error {
		_, err := client.CoreV1().Pods("default").Patch(ctx, pod, types.MergePatchType, []byte(body), metav1.PatchOptions{})
		return err
	}
	const status = `{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/network-status":"[]"}}}`
	// Policies take effect once the API server's informer has them.
	deadline := time.Now().Add(time.Minute)
	for err := patch(agent, "pod-b", status); err == nil; err = patch(agent, "pod-b", status) {
		if time.Now().After(deadline) {
			t.Fatal("the agent still patches another node's pods after a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, pod, body, wantErr string
		client                   kubernetes.Interface
	}{
		{"own node's status", "pod-a", status, "", agent},
		{"other node's status", "pod-b", status, "only pods on its own node (node-a); pod pod-b is on node-b", agent},
		{"own node's labels", "pod-a", `{"metadata":{"labels":{"app":"evil"}}}`, "spec or labels", agent},
		{"own node's other annotation", "pod-a", `{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/networks":"x"}}}`, "only the annotations", agent},
		{"admin, other node", "pod-b", `{"metadata":{"labels":{"app":"other"}}}`, "", admin},
	} {
		err := patch(tc.client, tc.pod, tc.body)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: %v, want error %q", tc.name, err, tc.wantErr)
		}
	}
}
