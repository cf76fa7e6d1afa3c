package cluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/test/e2e"
)

// In the hwnet-dra stack every device the bench's pod asks for must come
// through DRA: kubelet 1.37.1 crashes on pods that mix DRA-served
// extended resources with a device plugin's.
func TestDRAStackServesEveryPodResource(t *testing.T) {
	repo, err := e2e.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := draPools(repo)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := pools.Parse(data)
	if err != nil {
		t.Fatalf("draPools gives a config the agent refuses: %v\n%s", err, data)
	}
	dra := map[corev1.ResourceName]bool{}
	for _, r := range cfg.Resources {
		if r.Mode == pools.DRA {
			dra[corev1.ResourceName(r.FullName())] = true
		}
	}
	for name := range cnfPod("t", 0).Spec.Containers[0].Resources.Limits {
		if !dra[name] {
			t.Errorf("the pod's %s stays a device plugin's in the DRA stack", name)
		}
	}
}
