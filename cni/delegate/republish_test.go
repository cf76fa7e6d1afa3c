package delegate

import (
	"encoding/json"
	"testing"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/status"
)

// TestRecordedAttachmentsRenderAsTheADDDid: network-status written again
// from a record says what the ADD's own would have: which network holds
// the default route and with which gateways, and the KEP-3698 PodNetwork
// each attachment served. A record without every result is of an ADD that
// has not finished, and gives nothing to publish.
func TestRecordedAttachmentsRenderAsTheADDDid(t *testing.T) {
	res := func(ifName, ip, gw string) json.RawMessage {
		return json.RawMessage(`{"cniVersion":"1.1.0","interfaces":[{"name":"` + ifName + `","sandbox":"/n"}],"ips":[{"address":"` + ip + `","gateway":"` + gw + `","interface":0}]}`)
	}
	def := attachmentapi.Attachment{Network: "podnet", IfName: "eth0", Default: true, Result: res("eth0", "10.244.0.5/24", "10.244.0.1"), PodNetwork: mnv1.DefaultPodNetwork}
	tests := []struct {
		name          string
		second        attachmentapi.Attachment
		wantRoute     map[string][]string // interface -> default-route in network-status
		wantDefaultGW string              // interface with the KEP's isDefaultGW, "" for none
	}{
		{"NPWG default-route with gateways", attachmentapi.Attachment{Network: "cnf/sriov-a", IfName: "net1", Result: res("net1", "192.0.2.5/24", "192.0.2.1"),
			DefaultRoute: &attachmentapi.DefaultRoute{Gateways: []string{"192.0.2.254"}}}, map[string][]string{"net1": {"192.0.2.254"}}, ""},
		{"KEP-3698 isDefaultGW takes the result's gateway", attachmentapi.Attachment{Network: "cnf/sriov-a", IfName: "net1", Result: res("net1", "192.0.2.5/24", "192.0.2.1"),
			PodNetwork: "sriov-a", DefaultRoute: &attachmentapi.DefaultRoute{}}, map[string][]string{"net1": {"192.0.2.1"}}, "net1"},
		{"no choice: the default network's", attachmentapi.Attachment{Network: "cnf/sriov-a", IfName: "net1", Result: res("net1", "192.0.2.5/24", "192.0.2.1"),
			PodNetwork: "sriov-a"}, map[string][]string{"eth0": {"10.244.0.1"}}, "eth0"},
	}
	d := New(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done, complete := recordedAttachments(&attachmentapi.Record{Attachments: []attachmentapi.Attachment{def, tt.second}})
			if !complete {
				t.Fatal("a record with every result is complete")
			}
			annotations, _, err := d.render(done)
			if err != nil {
				t.Fatal(err)
			}
			var list []status.NetworkStatus
			if err := json.Unmarshal([]byte(annotations[status.Annotation]), &list); err != nil {
				t.Fatal(err)
			}
			for _, st := range list {
				if got, want := st.DefaultRoute, tt.wantRoute[st.Interface]; len(got) != len(want) || (len(want) > 0 && got[0] != want[0]) {
					t.Errorf("%s default-route %v, want %v", st.Interface, got, want)
				}
			}
			var kep []mnv1.NetworkStatus
			if err := json.Unmarshal([]byte(annotations[mnv1.NetworksStatusAnnotation]), &kep); err != nil {
				t.Fatal(err)
			}
			for _, n := range kep {
				if n.IsDefaultGW != (n.InterfaceName == tt.wantDefaultGW) {
					t.Errorf("KEP status %s isDefaultGW %v, want it on %q only", n.InterfaceName, n.IsDefaultGW, tt.wantDefaultGW)
				}
			}
		})
	}
	unfinished := tests[0].second
	unfinished.Result = nil
	if _, complete := recordedAttachments(&attachmentapi.Record{Attachments: []attachmentapi.Attachment{def, unfinished}}); complete {
		t.Error("a record missing a result is complete, want not: its ADD has not finished")
	}
}
