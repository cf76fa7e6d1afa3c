// Package multinetapi starts a real API server with hwnet's KEP-3698
// multi-network CRDs and pod admission policies of deploy/ installed and
// in force, for the tests of what the API server enforces and of the
// controller that runs against it.
package multinetapi

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// deployDir is the repository's deploy/, found from this file's path so
// tests of any package read the manifests the cluster installs.
func deployDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "deploy")
}

// Start runs an API server with the NetworkAttachmentDefinition, PodNetwork
// and PodNetworkAttachment CRDs and deploy/multinetwork/admission.yaml, and
// returns once the policies act on pods.
func Start(t *testing.T) *kubeapi.Server {
	t.Helper()
	api := kubeapi.Start(t)
	dir := deployDir()
	for _, crd := range []string{"network-attachment-definition.yaml", "multinetwork.hwnet.io_podnetworks.yaml", "multinetwork.hwnet.io_podnetworkattachments.yaml"} {
		api.ApplyCRD(t, filepath.Join(dir, "crds", crd))
	}
	api.ApplyFile(t, filepath.Join(dir, "multinetwork", "admission.yaml"))
	waitPoliciesInForce(t, api.Client())
	return api
}

// Pod is a pod of one container in namespace default, referencing networks
// unless that is empty.
func Pod(name, networks string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/cnf"}}},
	}
	if networks != "" {
		pod.Annotations = map[string]string{mnv1.NetworksAnnotation: networks}
	}
	return pod
}

// waitPoliciesInForce waits until a pod both policies act on is refused
// (validating) and, once valid, gated (mutating): policies take effect when
// the API server's policy informers have them, not at create.
func waitPoliciesInForce(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	bad := Pod("probe-bad", `[{"name":"a","isDefaultGW":true},{"name":"b","isDefaultGW":true}]`)
	for {
		_, errBad := client.CoreV1().Pods("default").Create(ctx, bad, dryRun)
		good, errGood := client.CoreV1().Pods("default").Create(ctx, Pod("probe-good", `[{"name":"a"}]`), dryRun)
		if errBad != nil && errGood == nil && len(good.Spec.SchedulingGates) == 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("admission policies not in force after a minute: bad pod error %v, good pod error %v", errBad, errGood)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
