package delegate

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/vfpolicytest"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// vlanNAD is a host-device network with sriov-cni's VLAN key.
func vlanNAD(pluginType, vlan string) string {
	return `{"cniVersion":"1.0.0","plugins":[{"type":"` + pluginType + `","vlan":` + vlan + `,"capabilities":{"ips":true},"ipam":{"type":"static"}}]}`
}

// TestVFSettingsPolicy_ADD (issue 42): a NetworkAttachmentDefinition's
// sriov-cni keys are judged by the VFSettingsPolicy for the NAD's
// namespace before anything is set or recorded: a VLAN outside the
// namespace's range fails the ADD with the policy's message, naming the
// key as the NAD spells it, also when sriov-cni would set it itself, and
// so does a MAC the pod's annotation asks for on a VF; an allowed VLAN is
// set.
func TestVFSettingsPolicy_ADD(t *testing.T) {
	n := newTestNode(t, "cni-vfpol")
	vfpolicytest.InstallCRD(t, n.api)
	vfpolicytest.Set(t, n.api, `{"rules": [{"name": "cnf-team", "namespaces": ["`+podNS+`"], "allow": {"vlans": [{"min": 100, "max": 199}]}}]}`)
	policy := vfpolicytest.Watch(t, n.api)
	n.createNAD(podNS, "vlan-300", sriovRes, vlanNAD("host-device", "300"))
	n.createNAD(podNS, "sriov-300", sriovRes, vlanNAD("sriov", "300"))
	n.createNAD(podNS, "vlan-150", sriovRes, vlanNAD("host-device", "150"))
	n.createNAD(podNS, "mac-tuning", sriovRes, `{"cniVersion":"1.0.0","plugins":[{"type":"host-device","capabilities":{"ips":true},"ipam":{"type":"static"}},{"type":"tuning","capabilities":{"mac":true}}]}`)
	vf := n.vfs("iavf", "0000:3e:00.0")[3]
	const refused = "VF setting vlan=300 refused by VFSettingsPolicy hwnet rule cnf-team for namespace " + podNS
	// The pod's own "mac" (NPWG 4.1.2.1.4, set by the tuning plugin in the
	// pod) gives the VF a MAC, which the rule does not grant either.
	const macRefused = "VF setting mac=02:00:00:00:00:fe refused by VFSettingsPolicy hwnet rule cnf-team for namespace " + podNS
	tests := []struct {
		pod, nad, extra, want string
		ops                   []string
	}{
		{"pol-vlan-300", "vlan-300", "", refused, nil},
		{"pol-sriov-300", "sriov-300", "", refused, nil},
		{"pol-mac", "mac-tuning", `,"mac":"02:00:00:00:00:fe"`, macRefused, nil},
		{"pol-vlan-150", "vlan-150", "", "", []string{"vlan 150 qos 0 proto 802.1Q"}},
	}
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.pod, func(t *testing.T) {
			rec := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
			n.withVFAdmin(rec)
			n.d.opts.VFPolicy = policy
			pod := n.createPod(tt.pod, `[{"name":"`+tt.nad+`","ips":["10.56.0.41/24"]`+tt.extra+`}]`, map[string][]string{sriovRes: {vf.Addr}})
			netns := n.podNetns("hwnet-" + tt.pod)
			waitPod(t, n, podNS, tt.pod)
			_, err := n.call(ctx, "ADD", tt.pod, netns, pod)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("ADD: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ADD: error %v, want one with %q", err, tt.want)
			}
			if got := vfrecord.Ops(t, rec, vf.Addr); !slices.Equal(got, tt.ops) {
				t.Errorf("calls through the PF %q, want %q", got, tt.ops)
			}
			if tt.want != "" {
				n.assertNoRecords(t)
				return
			}
			if _, err := n.call(ctx, "DEL", tt.pod, netns, pod); err != nil {
				t.Fatalf("DEL: %v", err)
			}
		})
	}
}
