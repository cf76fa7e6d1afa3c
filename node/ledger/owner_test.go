package ledger

import "testing"

// TestForeign: each front end owns its own holds; anything else holding a
// device keeps the pool from handing it out, as after a pool's mode switch
// with pods running.
func TestForeign(t *testing.T) {
	dp := FrontEnd{Resource: "intel.com/vf"}
	draFE := FrontEnd{Resource: "intel.com/vf", DRA: true}
	pod := Holder{Kind: Pod, Resource: "intel.com/vf", Namespace: "ns", Name: "cnf", Container: "app"}
	otherPool := Holder{Kind: Pod, Resource: "intel.com/old", Namespace: "ns", Name: "cnf", Container: "app"}
	claim := Holder{Kind: Claim, Namespace: "ns", Name: "c1", PodUIDs: []string{"uid-1"}}
	podCtr := Holder{Kind: Container, Namespace: "ns", Name: "cnf", Container: "sandbox-1"}
	claimCtr := Holder{Kind: Container, Namespace: "ns", Name: "p1", Container: "sandbox-2", PodUIDs: []string{"uid-1"}}
	strayCtr := Holder{Kind: Container, Namespace: "ns", Name: "gone", Container: "sandbox-3", PodUIDs: []string{"uid-9"}}
	// A StatefulSet's pod recreated under its name: kubelet reports the
	// new one, whose UID the pods' cache knows; the old one's sandbox
	// still holds the device.
	recreated := Holder{Kind: Pod, Resource: "intel.com/vf", Namespace: "ns", Name: "web-0", Container: "app", PodUIDs: []string{"uid-new"}}
	oldSandbox := Holder{Kind: Container, Namespace: "ns", Name: "web-0", Container: "sandbox-4", PodUIDs: []string{"uid-old"}}
	newSandbox := Holder{Kind: Container, Namespace: "ns", Name: "web-0", Container: "sandbox-5", PodUIDs: []string{"uid-new"}}
	for _, tc := range []struct {
		name    string
		holders []Holder
		fe      FrontEnd
		want    *Holder
	}{
		{"free", nil, dp, nil},
		{"own allocation", []Holder{pod}, dp, nil},
		{"own allocation and its attachment", []Holder{pod, podCtr}, dp, nil},
		{"allocation under another pool", []Holder{otherPool}, dp, &otherPool},
		{"claim in a device plugin pool", []Holder{claim}, dp, &claim},
		{"attachment its pod no longer holds", []Holder{podCtr}, dp, &podCtr},
		{"own claim", []Holder{claim}, draFE, nil},
		{"own claim and its pod's attachment", []Holder{claim, claimCtr}, draFE, nil},
		{"device plugin pod in a DRA pool", []Holder{pod, podCtr}, draFE, &podCtr},
		{"stray attachment in a DRA pool", []Holder{claim, strayCtr}, draFE, &strayCtr},
		{"a recreated pod's own attachment", []Holder{recreated, newSandbox}, dp, nil},
		{"the old pod's attachment beside its recreated namesake", []Holder{recreated, oldSandbox}, dp, &oldSandbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(map[string][]Holder{"0000:3b:02.0": tc.holders}, nil)
			got, foreign := l.Foreign("0000:3b:02.0", tc.fe)
			switch {
			case tc.want == nil && foreign:
				t.Errorf("Foreign = %v, want none", got)
			case tc.want != nil && (!foreign || compareHolders(got, *tc.want) != 0):
				t.Errorf("Foreign = %v, %v, want %v", got, foreign, *tc.want)
			}
		})
	}
}
