package delegate

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/cni/report"
)

// podClaimDevices is the DRA driver's answer for each pod, by UID: what
// dra.Driver.PodDevices reads from its checkpoint (tested in package dra).
type podClaimDevices map[string][]netclaim.Device

// claimDriver is the DRA driver's name in claims and in the claim status
// it writes: hwnet's default.
const claimDriver = "hwnet.io"

func (p podClaimDevices) PodDevices(_ context.Context, pod netclaim.Pod) ([]netclaim.Device, error) {
	return p[pod.UID], nil
}

// withClaims gives the node's Delegator claims and the claim status
// writer, as the agent wires them when it runs the DRA driver.
func (n *testNode) withClaims(src netclaim.Source) {
	opts := n.d.opts
	opts.Claims = src
	opts.ClaimStatus = report.NewClaimStatusWriter(kubernetesClient(n.t, n.counted), claimDriver)
	n.d = New(opts)
	n.seen.Store(n.d)
}

// allocate creates a claim allocated the devices at addrs (of this node's
// pool), as the scheduler would, and returns its devices as the DRA driver
// lists them, each with its network element ("" for none).
func (n *testNode) allocate(name, resource string, addrs, networks []string) []netclaim.Device {
	ctx := context.Background()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "vfs",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "hwnet", Count: int64(len(addrs)), AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}
	c, err := n.api.Client().ResourceV1().ResourceClaims(podNS).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{}
	devs := make([]netclaim.Device, len(addrs))
	for i, a := range addrs {
		r := resourceapi.DeviceRequestAllocationResult{Request: "vfs", Driver: claimDriver, Pool: nodeName, Device: fmt.Sprintf("vf-%d", i)}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, r)
		devs[i] = netclaim.Device{Request: "vfs", Driver: r.Driver, Pool: r.Pool, Device: r.Device, Resource: resource, PCIAddress: a}
		if networks[i] != "" {
			devs[i].Network = json.RawMessage(networks[i])
		}
	}
	if c, err = n.api.Client().ResourceV1().ResourceClaims(podNS).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		n.t.Fatal(err)
	}
	for i := range devs {
		devs[i].Claim = netclaim.ClaimRef{Namespace: podNS, Name: name, UID: string(c.UID)}
	}
	return devs
}

// TestKEP4817_ClaimNetworksAttachAndReport: a pod's DRA claims attach
// their devices to the networks their configuration names, after the
// annotation's networks; a NetworkAttachmentDefinition whose resource is
// a DRA pool takes a claimed device without a network of its own; each
// claim gets status.devices[].networkData and Ready with one PATCH, the
// pod network-status with one; the ADD reads nothing; DEL leaves nothing.
func TestKEP4817_ClaimNetworksAttachAndReport(t *testing.T) {
	n := newTestNode(t, "claim-nets")
	state, record := t.TempDir(), filepath.Join(t.TempDir(), "records.jsonl")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	n.createNAD(otherNS, "ib-net", ibRes, ibNAD(state, record))
	iavf, ib := n.vfs("iavf", "0000:3b:00.0"), n.vfs("mlx5_core", "0000:41:00.0")
	vfs := n.allocate("vfs", sriovRes, []string{iavf[1].Addr, iavf[3].Addr, iavf[5].Addr},
		[]string{`{"name":"sriov-a","interface":"data1","ips":["10.56.0.10/24"]}`, `{"name":"sriov-a","ips":["10.56.0.11/24"]}`, ""})
	ibs := n.allocate("ib", ibRes, []string{ib[1].Addr}, []string{`{"name":"ib-net","namespace":"other-ns","infiniband-guid":"00:11:22:33:44:55:66:77"}`})
	pod := n.createPod("claims", `[{"name":"sriov-a","ips":["10.56.0.12/24"]}]`, nil)
	n.withClaims(podClaimDevices{string(pod.UID): append(ibs, vfs...)})
	podNetns := n.podNetns("hwnet-claim-nets")
	waitPod(t, n, podNS, "claims")
	n.counter.Reset()
	ctx := context.Background()
	if _, err := n.call(ctx, "ADD", "claims-sandbox", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	list := networkStatus(t, n, "claims")
	want := []struct{ name, iface, pci string }{
		{"podnet", "eth0", ""},
		{"cnf/sriov-a", "net1", iavf[5].Addr},   // the annotation's, on the spare claimed VF
		{"other-ns/ib-net", "net2", ib[1].Addr}, // claim "ib" before claim "vfs"
		{"cnf/sriov-a", "data1", iavf[1].Addr},  //
		{"cnf/sriov-a", "net3", iavf[3].Addr},   //
	}
	if len(list) != len(want) {
		t.Fatalf("network-status %+v, want %d entries", list, len(want))
	}
	for i, w := range want {
		st := list[i]
		if st.Name != w.name || st.Interface != w.iface || (w.pci != "" && (st.DeviceInfo == nil || st.DeviceInfo.PCI.PCIAddress != w.pci)) {
			t.Errorf("network-status[%d] = %s on %s %+v, want %s on %s device %s", i, st.Name, st.Interface, st.DeviceInfo, w.name, w.iface, w.pci)
		}
	}
	if got := addrsOf(t, podNetns, "data1"); !slices.Equal(got, []string{"10.56.0.10/24"}) {
		t.Errorf("data1 addresses %v", got)
	}
	checkNoReadOneWrite(t, n)
	if got := n.counter.Snapshot()["PATCH resourceclaims/status"]; got != 2 {
		t.Errorf("%d PATCHes of resourceclaims/status, want one per claim", got)
	}
	checkClaimStatus(t, n, "vfs", map[string]string{"data1": "10.56.0.10/24", "net1": "10.56.0.12/24", "net3": "10.56.0.11/24"}, iavf[1].Netdev.Address)
	checkClaimStatus(t, n, "ib", map[string]string{"net2": ""}, "")
	for range 2 {
		if _, err := n.call(ctx, "DEL", "claims-sandbox", podNetns, pod); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	n.assertNothingLeft(podNetns, state)
}

// checkClaimStatus: the claim's status.devices has one entry per
// attached device with its interface, its IPs, a hardware address
// (20 bytes for InfiniBand) and Ready.
func checkClaimStatus(t *testing.T, n *testNode, name string, ifaces map[string]string, data1MAC string) {
	t.Helper()
	c, err := n.api.Client().ResourceV1().ResourceClaims(podNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Status.Devices) != len(ifaces) {
		t.Fatalf("claim %s status.devices %+v, want %d", name, c.Status.Devices, len(ifaces))
	}
	for _, d := range c.Status.Devices {
		nd := d.NetworkData
		if nd == nil || len(d.Conditions) != 1 || d.Conditions[0].Type != report.ClaimReadyCondition || d.Conditions[0].Status != metav1.ConditionTrue {
			t.Errorf("claim %s device %s: %+v", name, d.Device, d)
			continue
		}
		ip, ok := ifaces[nd.InterfaceName]
		if !ok || (ip != "" && !slices.Equal(nd.IPs, []string{ip})) || nd.HardwareAddress == "" {
			t.Errorf("claim %s device %s networkData %+v", name, d.Device, nd)
		}
		if name == "ib" && len(strings.Split(nd.HardwareAddress, ":")) != 20 {
			t.Errorf("InfiniBand hardwareAddress %q, want 20 bytes", nd.HardwareAddress)
		}
		if nd.InterfaceName == "data1" && nd.HardwareAddress != data1MAC {
			t.Errorf("data1 hardwareAddress %q, want the VF's %s", nd.HardwareAddress, data1MAC)
		}
	}
}
