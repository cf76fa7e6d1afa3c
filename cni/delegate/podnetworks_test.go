package delegate

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/api/netclaim"
)

// runMultinetController runs hwnet-controller, built from this tree, on
// the node's API server as its own process, as users run it: the
// conditions the ADD path checks are the real controller's.
func runMultinetController(t *testing.T, n *testNode) dynamic.Interface {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "hwnet-controller")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/hwnet-io/hwnet/cmd/hwnet-controller").CombinedOutput(); err != nil {
		t.Fatalf("building hwnet-controller: %v\n%s", err, out)
	}
	var logs bytes.Buffer
	cmd := exec.Command(bin, "--kubeconfig", n.api.WriteKubeconfig(t, dir), "--leader-elect=false", "--probe-addr=")
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("hwnet-controller's log:\n%s", logs.String())
		}
	})
	return dynamic.NewForConfigOrDie(n.api.Config())
}

func createObject[T mnv1.Object](t *testing.T, dyn dynamic.Interface, obj *T, namespace string) {
	t.Helper()
	u, err := mnv1.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	gvr := mnv1.PodNetworkResource
	if u.GetKind() == "PodNetworkAttachment" {
		gvr = mnv1.PodNetworkAttachmentResource
	}
	if _, err := dyn.Resource(gvr).Namespace(namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podNetworkObj(name string, nad mnv1.ParametersRef) *mnv1.PodNetwork {
	return &mnv1.PodNetwork{
		TypeMeta:   metav1.TypeMeta{APIVersion: mnv1.Group + "/" + mnv1.Version, Kind: "PodNetwork"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       mnv1.PodNetworkSpec{Provider: mnv1.Provider, ParametersRefs: []mnv1.ParametersRef{nad}},
	}
}

// waitReady waits until the agent's own PodNetwork cache sees the object
// Ready, as an ADD will.
func waitReady(t *testing.T, n *testNode, namespace, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		var conds []metav1.Condition
		if namespace == "" {
			if pn, err := n.d.opts.PodNetworks.PodNetwork(ctx, name); err == nil {
				conds = pn.Status.Conditions
			}
		} else if pna, err := n.d.opts.PodNetworks.PodNetworkAttachment(ctx, namespace, name); err == nil {
			conds = pna.Status.Conditions
		}
		if mnv1.NotReady(conds) == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s %s not Ready in the agent's cache: %v", namespace, name, conds)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func nadRefTo(namespace, name string) mnv1.ParametersRef {
	return mnv1.ParametersRef{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition", Namespace: namespace, Name: name}
}

func staticNAD(address, gateway string) string {
	return fmt.Sprintf(`{"cniVersion":"1.0.0","plugins":[{"type":"host-device","ipam":{"type":"static","addresses":[{"address":%q,"gateway":%q}]}}]}`, address, gateway)
}

// TestKEP3698_PodAttachesThroughPodNetworks: a pod referencing a PodNetwork
// (with isDefaultGW) and a PodNetworkAttachment (whose own NAD replaces its
// network's) gets a VF per network from its allocation, the addresses and
// default route, network-status and the KEP's PodStatus.networks in one
// PATCH, with no API read on the ADD path.
func TestKEP3698_PodAttachesThroughPodNetworks(t *testing.T) {
	n := newTestNode(t, "kep3698")
	n.api.CreateNamespace(t, "netops")
	dyn := runMultinetController(t, n)
	n.createNAD("netops", "sriov-dp", sriovRes, staticNAD("10.56.0.10/24", "10.56.0.1"))
	n.createNAD(podNS, "sriov-own", sriovRes, staticNAD("10.57.0.10/24", "10.57.0.1"))
	// netops is not among the namespaces pods may select from: a
	// PodNetwork, an administrator's object, may still name it.
	createObject(t, dyn, podNetworkObj("dataplane", nadRefTo("netops", "sriov-dp")), "")
	createObject(t, dyn, podNetworkObj("midhaul", nadRefTo("netops", "sriov-dp")), "")
	createObject(t, dyn, &mnv1.PodNetworkAttachment{
		TypeMeta:   metav1.TypeMeta{APIVersion: mnv1.Group + "/" + mnv1.Version, Kind: "PodNetworkAttachment"},
		ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: podNS},
		Spec:       mnv1.PodNetworkAttachmentSpec{PodNetworkName: "midhaul", ParametersRefs: []mnv1.ParametersRef{nadRefTo("", "sriov-own")}},
	}, podNS)
	for _, obj := range [][2]string{{"", "default"}, {"", "dataplane"}, {podNS, "fast"}} {
		waitReady(t, n, obj[0], obj[1])
	}

	iavf := n.vfs("iavf", "0000:3b:00.0")
	pod := n.createPodAnnotated("cnf", map[string]string{mnv1.NetworksAnnotation: `[{"name":"default"},
  {"name":"dataplane","interfaceName":"net1","isDefaultGW":true},{"attachmentName":"fast","interfaceName":"net2"}]`},
		map[string][]string{sriovRes: {iavf[0].Addr, iavf[1].Addr}})
	podNetns := n.podNetns("hwnet-kep3698")
	waitPod(t, n, podNS, "cnf")
	n.counter.Reset()
	t.Cleanup(func() { n.call(context.Background(), "DEL", "kep-sandbox", podNetns, pod) })
	if _, err := n.call(context.Background(), "ADD", "kep-sandbox", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	for ifName, want := range map[string]string{"net1": "10.56.0.10/24", "net2": "10.57.0.10/24"} {
		if got := addrsOf(t, podNetns, ifName); !slices.Equal(got, []string{want}) {
			t.Errorf("%s addresses %v, want %s", ifName, got, want)
		}
	}
	if got := defaultRoutes(t, podNetns); !slices.Equal(got, []string{"net1 via 10.56.0.1"}) {
		t.Errorf("default routes %v, want only net1's, the isDefaultGW network", got)
	}
	list := networkStatus(t, n, "cnf")
	if len(list) != 3 || list[1].Name != "netops/sriov-dp" || list[2].Name != podNS+"/sriov-own" {
		t.Errorf("network-status %+v, want the default network, netops/sriov-dp and %s/sriov-own", list, podNS)
	}
	checkPodNetworksStatus(t, n, "cnf")
	checkNoReadOneWrite(t, n)
	if _, err := n.call(context.Background(), "DEL", "kep-sandbox", podNetns, pod); err != nil {
		t.Fatalf("DEL: %v", err)
	}
}

// checkPodNetworksStatus: KEP "Status": name, interfaceName, one ip per
// family and the network holding the default gateway.
func checkPodNetworksStatus(t *testing.T, n *testNode, name string) {
	t.Helper()
	pod, err := n.api.Client().CoreV1().Pods(podNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []mnv1.NetworkStatus
	if err := json.Unmarshal([]byte(pod.Annotations[mnv1.NetworksStatusAnnotation]), &got); err != nil {
		t.Fatalf("%s %q: %v", mnv1.NetworksStatusAnnotation, pod.Annotations[mnv1.NetworksStatusAnnotation], err)
	}
	if len(got) != 3 || got[0].Name != "default" || got[0].InterfaceName != "eth0" || got[0].IsDefaultGW ||
		!strings.HasPrefix(got[0].IP, "10.244.0.") {
		t.Fatalf("networks status %+v: want default on eth0 with its pod IP first, not holding the gateway", got)
	}
	want := []mnv1.NetworkStatus{{Name: "dataplane", InterfaceName: "net1", IP: "10.56.0.10", IsDefaultGW: true},
		{Name: "midhaul", InterfaceName: "net2", IP: "10.57.0.10"}}
	if !slices.Equal(got[1:], want) {
		t.Errorf("networks status %+v, want %+v", got[1:], want)
	}
}

// TestKEP3698_AttachRefusals: the ADD refuses what the KEP says a pod cannot
// have, naming the network: a disabled network, an unknown one, and both
// kinds of annotation at once.
func TestKEP3698_AttachRefusals(t *testing.T) {
	n := newTestNode(t, "kep3698-bad")
	dyn := runMultinetController(t, n)
	n.createNAD(podNS, "sriov-own", sriovRes, staticNAD("10.57.0.10/24", "10.57.0.1"))
	off := podNetworkObj("off", nadRefTo(podNS, "sriov-own"))
	disabled := false
	off.Spec.Enabled = &disabled
	createObject(t, dyn, off, "")
	waitReady(t, n, "", "default")
	for i, tc := range []struct {
		annotations map[string]string
		want        string
	}{
		{map[string]string{mnv1.NetworksAnnotation: `[{"name":"off"}]`}, "PodNetwork off: not Ready: AdministrativelyDisabled"},
		{map[string]string{mnv1.NetworksAnnotation: `[{"name":"nowhere"}]`}, "PodNetwork nowhere: not found"},
		{map[string]string{mnv1.NetworksAnnotation: `[{"name":"off"}]`, "k8s.v1.cni.cncf.io/networks": "sriov-own"}, "both"},
	} {
		name := fmt.Sprintf("bad-%d", i)
		pod := n.createPodAnnotated(name, tc.annotations, nil)
		waitPod(t, n, podNS, name)
		_, err := n.call(context.Background(), "ADD", name, n.podNetns("hwnet-"+name), pod)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ADD of %v: %v, want an error saying %q", tc.annotations, err, tc.want)
		}
	}
}

// TestKEP3698_ClaimAttachesToPodNetwork: a DRA claim's network element may
// name a PodNetwork (netclaim.PodNetworkKey): the claimed VF attaches to
// the network's NetworkAttachmentDefinition with the element's own keys,
// and the pod's PodStatus.networks and the claim's networkData say so.
func TestKEP3698_ClaimAttachesToPodNetwork(t *testing.T) {
	n := newTestNode(t, "kep3698-claim")
	n.api.CreateNamespace(t, "netops")
	dyn := runMultinetController(t, n)
	n.createNAD("netops", "sriov-dp", sriovRes, staticNAD("10.56.0.20/24", "10.56.0.1"))
	createObject(t, dyn, podNetworkObj("dataplane", nadRefTo("netops", "sriov-dp")), "")
	waitReady(t, n, "", "dataplane")
	iavf := n.vfs("iavf", "0000:3b:00.0")
	devs := n.allocate("pn-claim", sriovRes, []string{iavf[2].Addr},
		[]string{`{"name":"dataplane","` + netclaim.PodNetworkKey + `":true,"interface":"dp0"}`})
	pod := n.createPod("pn-claim", "", nil)
	n.withClaims(podClaimDevices{string(pod.UID): devs})
	podNetns := n.podNetns("hwnet-kep-claim")
	waitPod(t, n, podNS, "pn-claim")
	ctx := context.Background()
	t.Cleanup(func() { n.call(context.Background(), "DEL", "pn-claim-sandbox", podNetns, pod) })
	if _, err := n.call(ctx, "ADD", "pn-claim-sandbox", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	if got := addrsOf(t, podNetns, "dp0"); !slices.Equal(got, []string{"10.56.0.20/24"}) {
		t.Errorf("dp0 addresses %v, want the PodNetwork's NAD's", got)
	}
	list := networkStatus(t, n, "pn-claim")
	if len(list) != 2 || list[1].Name != "netops/sriov-dp" || list[1].Interface != "dp0" {
		t.Errorf("network-status %+v, want netops/sriov-dp on dp0", list)
	}
	got, err := n.api.Client().CoreV1().Pods(podNS).Get(ctx, "pn-claim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if st := got.Annotations[mnv1.NetworksStatusAnnotation]; !strings.Contains(st, `"name":"dataplane","interfaceName":"dp0","ip":"10.56.0.20"`) {
		t.Errorf("%s = %s, want dataplane on dp0", mnv1.NetworksStatusAnnotation, st)
	}
	checkClaimStatus(t, n, "pn-claim", map[string]string{"dp0": "10.56.0.20/24"}, iavf[2].Netdev.Address)
}
