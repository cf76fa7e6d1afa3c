package report_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/hwnet-io/hwnet/api/netclaim"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/report"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// allocatedClaim creates a claim allocated one hwnet.io device and one of
// another driver, whose own status entry is already there.
func allocatedClaim(t *testing.T, client kubernetes.Interface, ns string) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := ctxFor(t, 30*time.Second)
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vf"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "vfs", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "hwnet", Count: 2, AllocationMode: resourceapi.DeviceAllocationModeExactCount}}}}}}
	c, err := client.ResourceV1().ResourceClaims(ns).Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "vfs", Driver: "hwnet.io", Pool: "node-1", Device: "pci-0000-3b-01-1"},
		{Request: "vfs", Driver: "other.example.com", Pool: "node-1", Device: "gpu-0"}}}}
	c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: "other.example.com", Pool: "node-1", Device: "gpu-0",
		NetworkData: &resourceapi.NetworkDeviceData{InterfaceName: "gpu0"}}}
	if c, err = client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{FieldManager: "other"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKEP4817_ClaimDeviceStatus: networkData (interfaceName, ips in CIDR
// form, a 20-byte IPoIB hardwareAddress), the data (VF settings applied,
// the representor) and a Ready condition land in
// status.devices with one PATCH of resourceclaims/status; another driver's
// entry stays; a device not allocated is refused; a replaced claim is
// never written.
func TestKEP4817_ClaimDeviceStatus(t *testing.T) {
	const ns = "claims"
	s := apiServer(t, ns)
	c := allocatedClaim(t, s.Client(), ns)
	cfg, counter := kubeapi.CountRequests(s.Config())
	w := report.NewClaimStatusWriter(kubernetes.NewForConfigOrDie(cfg), "hwnet.io/node-1")
	ref := netclaim.ClaimRef{Namespace: ns, Name: c.Name, UID: string(c.UID)}
	ib := "00:00:10:49:fe:80:00:00:00:00:00:00:00:11:22:33:44:55:66:77"
	dev := netclaim.DeviceStatus{Driver: "hwnet.io", Pool: "node-1", Device: "pci-0000-3b-01-1", InterfaceName: "net1",
		IPs: []string{"10.56.0.10/24"}, HardwareAddress: strings.ToUpper(ib), Network: "claims/ib-net",
		VF: &vfsettings.Settings{VLAN: ptr.To(100), MaxTxRate: ptr.To[uint64](1000)}, Representor: "enp59s0f0_1"}
	if err := w.SetClaimDeviceStatus(ctxFor(t, 30*time.Second), ref, []netclaim.DeviceStatus{dev}); err != nil {
		t.Fatal(err)
	}
	if got := counter.Snapshot(); got["PATCH resourceclaims/status"] != 1 || len(got) != 1 {
		t.Errorf("requests %v, want one PATCH of resourceclaims/status", got)
	}
	got, err := s.Client().ResourceV1().ResourceClaims(ns).Get(ctxFor(t, 10*time.Second), c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Devices) != 2 {
		t.Fatalf("status.devices %+v, want the other driver's and hwnet's", got.Status.Devices)
	}
	i := slices.IndexFunc(got.Status.Devices, func(d resourceapi.AllocatedDeviceStatus) bool { return d.Driver == "hwnet.io" })
	d := got.Status.Devices[i]
	if nd := d.NetworkData; nd == nil || nd.InterfaceName != "net1" || !slices.Equal(nd.IPs, dev.IPs) || nd.HardwareAddress != ib {
		t.Errorf("networkData %+v", d.NetworkData)
	}
	var data report.DeviceData
	if d.Data == nil || json.Unmarshal(d.Data.Raw, &data) != nil || !reflect.DeepEqual(data.VF, dev.VF) || data.Representor != dev.Representor {
		t.Errorf("data %v, want the applied VF settings and the representor", d.Data)
	}
	if len(d.Conditions) != 1 || d.Conditions[0].Type != "Ready" || d.Conditions[0].Status != metav1.ConditionTrue {
		t.Errorf("conditions %+v, want Ready True", d.Conditions)
	}
	if other := got.Status.Devices[1-i]; other.NetworkData == nil || other.NetworkData.InterfaceName != "gpu0" {
		t.Errorf("the other driver's entry changed: %+v", other)
	}
	for _, tt := range []struct {
		name string
		ref  netclaim.ClaimRef
		dev  netclaim.DeviceStatus
	}{
		{"device not allocated", ref, netclaim.DeviceStatus{Driver: "hwnet.io", Pool: "node-1", Device: "pci-0000-3b-01-2", InterfaceName: "net2"}},
		{"claim replaced", netclaim.ClaimRef{Namespace: ns, Name: c.Name, UID: "00000000-0000-0000-0000-000000000000"}, dev},
	} {
		if err := w.SetClaimDeviceStatus(ctxFor(t, 30*time.Second), tt.ref, []netclaim.DeviceStatus{tt.dev}); err == nil {
			t.Errorf("%s: applied", tt.name)
		} else {
			t.Logf("%s: %v", tt.name, err)
		}
	}
}
