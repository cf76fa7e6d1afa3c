package dra_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/vfadmin"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/vfpolicytest"
	"github.com/hwnet-io/hwnet/test/vfrecord"
)

// vfOnly is an opaque configuration with VF settings and no network.
func vfOnly(vf string) string {
	return `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","vf":` + vf + `}`
}

func inNamespace(c *resourceapi.ResourceClaim, ns string) *resourceapi.ResourceClaim {
	c.Namespace = ns
	return c
}

// newPolicedPreparer is newPreparer with the VF settings policy policy.
func newPolicedPreparer(t *testing.T, n *testNode, dir string, admin dra.VFAdmin, policy dra.VFPolicy) *preparer {
	t.Helper()
	opts := dra.Options{NodeName: nodeName, PluginDir: filepath.Join(dir, "plugin"), RegistrarDir: filepath.Join(dir, "registry"),
		CDIDir: filepath.Join(dir, "cdi"), DevinfoDir: filepath.Join(dir, "devinfo"), DevRoot: n.node.DevRoot(), SysfsRoot: n.node.SysRoot(),
		VFAdmin: admin, VFPolicy: policy}
	opts.Ledger = openLedger(t, ledger.Sources{Checkpoint: dra.CheckpointPath("", opts.PluginDir)}, n.node.SysRoot())
	drv, err := dra.NewUnregistered(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	return &preparer{drv: drv, opts: opts}
}

// TestVFSettingsPolicy_Prepare (issue 42): a claim's own VF settings are
// judged by the VFSettingsPolicy for the claim's namespace, a refusal
// failing the prepare with the policy's message before anything is set
// or written; a DeviceClass's settings apply unchecked, even while the
// policy is unknown.
func TestVFSettingsPolicy_Prepare(t *testing.T) {
	kubeapi.Binaries(t)
	api := kubeapi.Start(t)
	vfpolicytest.InstallCRD(t, api)
	vfpolicytest.Set(t, api, `{"rules": [{"name": "team-a", "namespaces": ["team-a"], "allow": {"vlans": [{"min": 100, "max": 199}]}}]}`)
	policy := vfpolicytest.Watch(t, api)
	n := newTestNode(t)
	const vlan100 = "vlan 100 qos 0 proto 802.1Q"
	tests := []struct {
		name  string
		claim *resourceapi.ResourceClaim
		want  string   // the refusal, "" for none
		ops   []string // the calls through the PF
	}{
		{"claim's trust, no rule for its namespace", withConfig(claim("t", alloc("vfs", netdevVF)), resourceapi.AllocationConfigSourceClaim, nil, vfOnly(`{"trust":true}`)),
			"VF setting vf.trust=true refused by VFSettingsPolicy hwnet: no rule for namespace ns", nil},
		{"class's VLAN, unchecked", withConfig(claim("c", alloc("vfs", netdevVF)), resourceapi.AllocationConfigSourceClass, nil, vfOnly(`{"vlan":100}`)),
			"", []string{vlan100}},
		{"claim's VLAN in its rule's range", inNamespace(withConfig(claim("a", alloc("vfs", netdevVF)), resourceapi.AllocationConfigSourceClaim, nil, vfOnly(`{"vlan":150}`)), "team-a"),
			"", []string{"vlan 150 qos 0 proto 802.1Q"}},
		{"claim's VLAN out of its rule's range", inNamespace(withConfig(claim("o", alloc("vfs", netdevVF)), resourceapi.AllocationConfigSourceClaim, nil, vfOnly(`{"vlan":300}`)), "team-a"),
			"VF setting vf.vlan=300 refused by VFSettingsPolicy hwnet rule team-a for namespace team-a", nil},
		{"claim's config over the class's is checked", inNamespace(withConfig(withConfig(claim("w", alloc("vfs", netdevVF)),
			resourceapi.AllocationConfigSourceClass, nil, vfOnly(`{"vlan":100}`)), resourceapi.AllocationConfigSourceClaim, nil, vfOnly(`{"vlan":120,"spoofchk":false}`)), "team-a"),
			"VF setting vf.spoofchk=false refused by VFSettingsPolicy hwnet rule team-a for namespace team-a", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			rec := vfadmin.NewRecorder(filepath.Join(dir, "calls.jsonl"))
			p := newPolicedPreparer(t, n, dir, rec, policy)
			res := p.prepare(t, tt.claim)
			checkPrepared(t, p, rec, res.Err, tt.want, tt.ops)
		})
	}
	t.Run("unknown policy", func(t *testing.T) {
		vfpolicytest.Delete(t, api)
		vfpolicytest.WaitFor(t, "the policy to be unknown", func() bool { return policy.View().Spec == nil })
		dir := t.TempDir()
		rec := vfadmin.NewRecorder(filepath.Join(dir, "calls.jsonl"))
		p := newPolicedPreparer(t, n, dir, rec, policy)
		res := p.prepare(t, inNamespace(withConfig(claim("u", alloc("vfs", netdevVF)), resourceapi.AllocationConfigSourceClaim, nil, vfOnly(`{"vlan":150}`)), "team-a"))
		checkPrepared(t, p, rec, res.Err, "VF setting vf.vlan=150 refused for namespace team-a: VFSettingsPolicy hwnet is unknown (no VFSettingsPolicy named hwnet exists)", nil)
		res = p.prepare(t, withConfig(claim("uc", alloc("vfs", netdevVF)), resourceapi.AllocationConfigSourceClass, nil, vfOnly(`{"vlan":100}`)))
		checkPrepared(t, p, rec, res.Err, "", []string{vlan100})
	})
}

// checkPrepared checks a prepare's error against want and the calls made
// through the PF against ops; a refused claim leaves no checkpoint entry,
// CDI spec or reservation behind.
func checkPrepared(t *testing.T, p *preparer, rec *vfadmin.Recorder, err error, want string, ops []string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("prepare: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("prepare: error %v, want one with %q", err, want)
	}
	if got := vfrecord.Ops(t, rec, "0000:3b:01.1"); !slices.Equal(got, ops) {
		t.Errorf("calls through the PF %q, want %q", got, ops)
	}
	if want == "" {
		return
	}
	data, _ := os.ReadFile(filepath.Join(p.opts.PluginDir, "checkpoint.json"))
	specs, _ := os.ReadDir(p.opts.CDIDir)
	if strings.Contains(string(data), `"claim-`) || len(specs) != 0 {
		t.Errorf("a refused claim left: checkpoint %s, CDI specs %v", data, specs)
	}
	if got := p.prepare(t, claim("next", alloc("vfs", netdevVF))); got.Err != nil {
		t.Errorf("the refused claim's device for another claim: %v", got.Err)
	}
	if err := p.unprepare(t, "next"); err != nil {
		t.Error(err)
	}
}
