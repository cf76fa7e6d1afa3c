package delegate

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/cni/attachments"
)

// TestADDReservesItsDevices: the CNI ADD's device binding is a hand-out
// in the device ledger. A pod recreated under the same name (a
// StatefulSet's) whose VF the old pod's sandbox still holds (its teardown
// has not run) is refused, naming that sandbox, with nothing recorded;
// once the old sandbox's DEL ran, the ADD goes through.
func TestADDReservesItsDevices(t *testing.T) {
	n := newTestNode(t, "cni-ledger")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	vf := n.vfs("iavf", "0000:3e:00.0")[2]
	ctx := context.Background()
	const networks = `[{"name":"sriov-a","ips":["10.56.0.40/24"]}]`
	devices := map[string][]string{sriovRes: {vf.Addr}}

	old := n.createPod("web-0", networks, devices)
	waitPod(t, n, podNS, "web-0")
	oldNetns := n.podNetns("hwnet-web-old")
	if _, err := n.call(ctx, "ADD", "sandbox-old", oldNetns, old); err != nil {
		t.Fatalf("first ADD: %v", err)
	}
	// The pod is deleted and recreated under its name; kubelet gives the
	// new one the same VF while the old sandbox's teardown has not run.
	if err := n.api.Client().CoreV1().Pods(podNS).Delete(ctx, "web-0", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, n, "web-0", string(old.UID))
	recreated := n.createPod("web-0", networks, devices)
	waitPod(t, n, podNS, "web-0")
	newNetns := n.podNetns("hwnet-web-new")
	_, err := n.call(ctx, "ADD", "sandbox-new", newNetns, recreated)
	if err == nil || !strings.Contains(err.Error(), "device "+vf.Addr+" is held by container sandbox-old of pod cnf/web-0") {
		t.Fatalf("ADD of the recreated pod while the old sandbox holds its VF: %v, want it refused naming the old sandbox", err)
	}
	if rec, err := attachments.NewStore(filepath.Join(n.dir, "cache")).Load("sandbox-new"); err == nil {
		t.Errorf("the refused ADD left a record: %+v", rec)
	}
	if _, err := n.call(ctx, "DEL", "sandbox-old", oldNetns, old); err != nil {
		t.Fatalf("the old sandbox's DEL: %v", err)
	}
	if _, err := n.call(ctx, "ADD", "sandbox-new", newNetns, recreated); err != nil {
		t.Fatalf("ADD once the old sandbox let go: %v", err)
	}
	if _, err := n.call(ctx, "DEL", "sandbox-new", newNetns, recreated); err != nil {
		t.Fatal(err)
	}
}

// waitGone waits until the pod cache no longer holds the pod of that UID.
func waitGone(t testing.TB, n *testNode, name, uid string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); n.d.opts.Pods.UIDOf(podNS, name) == uid; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("pod %s/%s (uid %s) still in the cache", podNS, name, uid)
		}
	}
}
