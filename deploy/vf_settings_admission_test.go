package deploy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	nadclient "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/hwnet-io/hwnet/api/vfpolicy"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/test/kubeapi"
)

// The VF settings policy as deploy/ installs it: its CRD, the shipped
// VFSettingsPolicy hwnet, and the admission policies of NADs (base) and
// of claims and templates (the dra component).
var vfSettingsManifests = []string{
	"hwnet-vf-settings-policy.yaml", "hwnet-vf-settings-admission.yaml", "dra/vf-settings-admission.yaml",
}

var vfSettingsPolicies = schema.GroupVersionResource{Group: "hwnet.io", Version: "v1alpha1", Resource: "vfsettingspolicies"}

// testVFRules grant team-a VLANs 100-199, rates up to 1000 Mbit/s and
// the partition key 0x8001, and
// namespaces labelled hwnet.io/tenant=lab trust and spoof check off. The
// last rule's empty matchLabels matches no namespace, as in the agent: a
// rule grants only whom it names.
const testVFRules = `[
 {"name": "team-a", "namespaces": ["team-a"], "allow": {"vlans": [{"min": 100, "max": 199}], "maxTxRateMbps": 1000, "pKeys": ["0x8001"]}},
 {"name": "lab", "namespaceSelector": {"matchLabels": {"hwnet.io/tenant": "lab"}}, "allow": {"trust": true, "spoofchkOff": true}},
 {"name": "no-one", "namespaceSelector": {"matchLabels": {}}, "allow": {"vlans": [{"min": 1, "max": 4094}], "trust": true}}]`

// tenant is a namespace user: a ServiceAccount whose Role allows only
// claims, claim templates and NADs in its own namespace, with its real
// token.
type tenant struct {
	ns   string
	kube kubernetes.Interface
	nads nadclient.Interface
}

// vfAPI is a real API server with the VF settings policy of deploy/ in
// force, testVFRules in the VFSettingsPolicy hwnet, and three tenants:
// team-a (named by a rule), lab (labelled for a rule) and rogue (no rule).
type vfAPI struct {
	api     *kubeapi.Server
	admin   kubernetes.Interface
	dyn     dynamic.Interface
	tenants map[string]tenant
}

func startVFAPI(t *testing.T) *vfAPI {
	t.Helper()
	api := kubeapi.Start(t)
	e := &vfAPI{api: api, admin: api.Client(), dyn: dynamic.NewForConfigOrDie(api.Config()), tenants: map[string]tenant{}}
	api.ApplyCRD(t, "crds/network-attachment-definition.yaml")
	api.ApplyCRD(t, "crds/hwnet.io_vfsettingspolicies.yaml")
	for _, f := range vfSettingsManifests {
		api.ApplyFile(t, f)
	}
	e.setRules(t, testVFRules)
	for ns, labels := range tenantLabels {
		e.tenants[ns] = e.newTenant(t, ns, labels)
	}
	e.waitPolicies(t)
	return e
}

// tenantLabels are the test's tenant namespaces with their labels.
var tenantLabels = map[string]map[string]string{"team-a": nil, "lab": {"hwnet.io/tenant": "lab"}, "rogue": nil}

// setRules writes rules (JSON) into the VFSettingsPolicy hwnet.
func (e *vfAPI) setRules(t *testing.T, rules string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"rules":%s}}`, rules)
	_, err := e.dyn.Resource(vfSettingsPolicies).Patch(context.Background(), "hwnet", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("VFSettingsPolicy hwnet rules %s: %v", rules, err)
	}
}

func (e *vfAPI) newTenant(t *testing.T, ns string, labels map[string]string) tenant {
	t.Helper()
	ctx := context.Background()
	if _, err := e.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg, err := kubeapi.NamespaceUser(ctx, e.admin, e.api.Config(), ns, []rbacv1.PolicyRule{
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims", "resourceclaimtemplates"}, Verbs: []string{"create", "get", "update", "delete"}},
		{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"network-attachment-definitions"}, Verbs: []string{"create", "get", "update", "delete"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tenant{ns: ns, kube: kubernetes.NewForConfigOrDie(cfg), nads: nadclient.NewForConfigOrDie(cfg)}
}

// waitPolicies waits until the API server enforces both policies with
// testVFRules: a VLAN outside team-a's range is refused naming its rule.
func (e *vfAPI) waitPolicies(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	a := e.tenants["team-a"]
	probes := map[string]func(name string) error{
		"claims": func(name string) error { return createClaim(ctx, a, name, "hwnet.io", `{"vlan": 300}`) },
		"NADs":   func(name string) error { return createNAD(ctx, a, name, true, hostDeviceConfig(`"vlan": 300`)) },
	}
	n := 0
	for what, probe := range probes {
		kubeapi.WaitFor(t, "the VF settings policy of "+what+" in force", func() bool {
			n++
			err := probe(fmt.Sprintf("probe-%d", n))
			return err != nil && strings.Contains(err.Error(), "rule team-a")
		})
	}
}

// claimSpec asks for one device with an opaque configuration of driver
// whose parameters are hwnet's NetworkConfig with vf.
func claimSpec(driver, vf string) resourcev1.ResourceClaimSpec {
	return claimSpecParams(driver, fmt.Sprintf(`{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig", "vf": %s}`, vf))
}

// claimSpecParams is claimSpec with the whole opaque parameters.
func claimSpecParams(driver, params string) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
		Requests: []resourcev1.DeviceRequest{{Name: "vf", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "hwnet"}}},
		Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"vf"},
			DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
				Driver: driver, Parameters: runtime.RawExtension{Raw: []byte(params)}}}}},
	}}
}

func createClaim(ctx context.Context, u tenant, name, driver, vf string) error {
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: claimSpec(driver, vf)}
	_, err := u.kube.ResourceV1().ResourceClaims(u.ns).Create(ctx, c, metav1.CreateOptions{})
	return err
}

func createClaimTemplate(ctx context.Context, u tenant, name, driver, vf string) error {
	c := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: claimSpec(driver, vf)}}
	_, err := u.kube.ResourceV1().ResourceClaimTemplates(u.ns).Create(ctx, c, metav1.CreateOptions{})
	return err
}

// hostDeviceConfig is a NAD config whose first plugin, host-device, takes
// the VF and carries the sriov-cni keys members (JSON members).
func hostDeviceConfig(members string) string {
	return fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "vf", "plugins": [{"type": "host-device", %s}, {"type": "tuning"}]}`, members)
}

// createNAD creates NAD name with config, annotated with a device pool's
// resource name when device.
func createNAD(ctx context.Context, u tenant, name string, device bool, config string) error {
	nad := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
	if device {
		nad.Annotations = map[string]string{"k8s.v1.cni.cncf.io/resourceName": "intel.com/sriov_netdevice"}
	}
	_, err := u.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(u.ns).Create(ctx, nad, metav1.CreateOptions{})
	return err
}

// refusal is the contract's message for setting (knob=value) in ns, whose
// rule is rule ("" for none).
func refusal(setting, rule, ns string) string {
	if rule == "" {
		return fmt.Sprintf("VF setting %s refused by VFSettingsPolicy hwnet: no rule for namespace %s", setting, ns)
	}
	return fmt.Sprintf("VF setting %s refused by VFSettingsPolicy hwnet rule %s for namespace %s", setting, rule, ns)
}

// TestVFSettingsRefusedAtAdmission: a namespace user's own claim, claim
// template and NAD ask for VF settings; the admission policies admit what
// the VFSettingsPolicy grants its namespace and refuse the rest, naming
// the knob as the object spells it, the value and the rule. The agent's
// Go evaluation of the same objects refuses the same (goRefusal).
func TestVFSettingsRefusedAtAdmission(t *testing.T) {
	e := startVFAPI(t)
	rules := map[string]string{"team-a": "team-a", "lab": "lab", "rogue": ""}
	for i, tc := range []struct {
		name string
		ns   string
		// vf is the claim's "vf" object; claimRefused its refused
		// setting as the claim spells it, "" when admitted.
		vf, claimRefused string
		// nad is the NAD's sriov-cni keys; nadRefused likewise.
		nad, nadRefused string
	}{
		{"VLAN outside the range", "team-a", `{"vlan": 300}`, "vf.vlan=300", `"vlan": 300`, "vlan=300"},
		{"VLAN 0, untagged", "team-a", `{"vlan": 0}`, "vf.vlan=0", `"vlan": 0`, "vlan=0"},
		{"VLAN in upper case", "team-a", `{"VLAN": 300}`, "vf.vlan=300", `"VLAN": 300`, "vlan=300"},
		{"trust on", "team-a", `{"trust": true}`, "vf.trust=true", `"trust": "on"`, "trust=on"},
		{"spoof check off", "team-a", `{"spoofchk": false}`, "vf.spoofchk=false", `"spoofchk": "off"`, "spoofchk=off"},
		{"a MAC", "team-a", `{"macAddress": "02:00:00:00:00:01"}`, "vf.macAddress=02:00:00:00:00:01", `"mac": "02:00:00:00:00:01"`, "mac=02:00:00:00:00:01"},
		{"max rate above the ceiling", "team-a", `{"maxTxRate": 2000}`, "vf.maxTxRate=2000", `"max_tx_rate": 2000`, "max_tx_rate=2000"},
		{"min rate above the ceiling", "team-a", `{"minTxRate": 1500}`, "vf.minTxRate=1500", `"min_tx_rate": 1500`, "min_tx_rate=1500"},
		{"max rate 0 (unlimited) under a ceiling", "team-a", `{"maxTxRate": 0}`, "vf.maxTxRate=0", `"max_tx_rate": 0`, "max_tx_rate=0"},
		{"QoS", "team-a", `{"vlan": 150, "vlanQoS": 3}`, "vf.vlanQoS=3", `"vlan": 150, "vlanQoS": 3`, "vlanQoS=3"},
		{"802.1ad", "team-a", `{"vlan": 150, "vlanProto": "802.1ad"}`, "vf.vlanProto=802.1ad", `"vlan": 150, "vlanProto": "802.1AD"`, "vlanProto=802.1AD"},
		{"link state", "team-a", `{"linkState": "enable"}`, "vf.linkState=enable", `"link_state": "enable"`, "link_state=enable"},
		{"MTU", "team-a", `{"mtu": 9000}`, "vf.mtu=9000", `"mtu": 9000`, "mtu=9000"},
		{"VLAN and rate in range, defaults", "team-a", `{"vlan": 150, "vlanQoS": 0, "vlanProto": "802.1Q", "maxTxRate": 1000, "minTxRate": 100, "trust": false, "spoofchk": true}`, "",
			`"vlan": 150, "vlanQoS": 0, "vlanProto": "802.1q", "max_tx_rate": 1000, "min_tx_rate": 100, "trust": "off", "spoofchk": "on"`, ""},
		{"trust granted by labels", "lab", `{"trust": true, "spoofchk": false}`, "", `"trust": "on", "spoofchk": "off"`, ""},
		{"VLAN not granted by labels", "lab", `{"vlan": 150}`, "vf.vlan=150", `"vlan": 150`, "vlan=150"},
		{"no rule", "rogue", `{"vlan": 150}`, "vf.vlan=150", `"vlan": 150`, "vlan=150"},
		{"no rule, trust off", "rogue", `{"trust": false}`, "", `"trust": "off"`, ""},
		// A QoS or protocol alone sets VLAN 0: it would strip an admin's VLAN.
		{"QoS 0 without a VLAN", "team-a", `{"vlanQoS": 0}`, "vf.vlanQoS=0", `"vlanQoS": 0`, "vlanQoS=0"},
		{"802.1Q without a VLAN", "rogue", `{"vlanProto": "802.1Q"}`, "vf.vlanProto=802.1Q", `"vlanProto": "802.1Q"`, "vlanProto=802.1Q"},
		{"a partition key granted", "team-a", `{"pKey": "0x8001"}`, "", `"pkey": "0x8001"`, ""},
		{"a partition key granted, in upper case", "team-a", `{"PKEY": "0X8001"}`, "", `"pkey": "0X8001"`, ""},
		{"a partition key not granted", "team-a", `{"pKey": "0x8002"}`, "vf.pKey=0x8002", `"pkey": "0x8002"`, "pkey=0x8002"},
		{"limited membership of a granted full one", "team-a", `{"pKey": "0x0001"}`, "vf.pKey=0x0001", `"pkey": "0x0001"`, "pkey=0x0001"},
		{"a partition key, no rule", "rogue", `{"pKey": "0x8001"}`, "vf.pKey=0x8001", `"pkey": "0x8001"`, "pkey=0x8001"},
		{"a partition key not granted by labels", "lab", `{"pKey": "0x8001"}`, "vf.pKey=0x8001", `"pkey": "0x8001"`, "pkey=0x8001"},
	} {
		u := e.tenants[tc.ns]
		name := fmt.Sprintf("case-%d", i)
		want := func(setting string) string {
			if setting == "" {
				return ""
			}
			return refusal(setting, rules[tc.ns], tc.ns)
		}
		checkGoRefusal(t, tc.name+": claim, in Go", goClaimRefusal(t, tc.ns, tc.vf), want(tc.claimRefused))
		checkGoRefusal(t, tc.name+": NAD, in Go", goNADRefusal(t, tc.ns, hostDeviceConfig(tc.nad)), want(tc.nadRefused))
		runWrites(t, []write{
			{tc.name + ": claim", want(tc.claimRefused), func(ctx context.Context) error { return createClaim(ctx, u, name, "hwnet.io", tc.vf) }},
			{tc.name + ": claim template", want(tc.claimRefused), func(ctx context.Context) error {
				return createClaimTemplate(ctx, u, name, "hwnet.io", tc.vf)
			}},
			{tc.name + ": NAD", want(tc.nadRefused), func(ctx context.Context) error { return createNAD(ctx, u, name, true, hostDeviceConfig(tc.nad)) }},
		})
	}
}

// TestVFSettingsNADsReadLikeTheAgent: the NAD policy reads spec.config's
// text without a JSON parser; what it cannot see through is refused, and
// what reaches no VF passes.
func TestVFSettingsNADsReadLikeTheAgent(t *testing.T) {
	e := startVFAPI(t)
	a := e.tenants["team-a"]
	unjudged := "cannot be judged by VFSettingsPolicy hwnet: spec.config has a \\u escape"
	for i, tc := range []struct {
		name    string
		device  bool
		config  string
		refused string
	}{
		{"a key spelled with a \\u escape", true, hostDeviceConfig(`"vl\u0061n": 300`), unjudged},
		{"a repeated key, the second out of range", true, hostDeviceConfig(`"vlan": 150, "vlan": 300`), refusal("vlan=300", "team-a", "team-a")},
		{"a single plugin, no list", true, `{"cniVersion": "1.0.0", "name": "vf", "type": "host-device", "trust": "on"}`, refusal("trust=on", "team-a", "team-a")},
		{"a later plugin's MTU (tuning sets the VF netdev's)", true, `{"cniVersion": "1.0.0", "name": "vf", "plugins": [{"type": "host-device"}, {"type": "tuning", "mtu": 9000}]}`,
			refusal("mtu=9000", "team-a", "team-a")},
		{"sriov-cni without a resource name", false, `{"cniVersion": "1.0.0", "name": "vf", "type": "sriov", "spoofchk": "off"}`, refusal("spoofchk=off", "team-a", "team-a")},
		{"sriov-cni's capabilities mac: true, no MAC", true, `{"cniVersion": "1.0.0", "name": "vf", "type": "sriov", "capabilities": {"mac": true, "ips": true}}`, ""},
		{"a key set to null, as absent", true, hostDeviceConfig(`"vlan": null`), ""},
		{"a VLAN as a string", true, hostDeviceConfig(`"vlan": "150"`), refusal("vlan=150", "team-a", "team-a")},
		{"a VLAN beyond int64, no error to fail open on", true, hostDeviceConfig(`"vlan": 123456789012345678901`),
			refusal("vlan=123456789012345678901", "team-a", "team-a")},
		{"a bridge's VLAN, no VF", false, `{"cniVersion": "1.0.0", "name": "br", "type": "bridge", "bridge": "br0", "vlan": 300, "mtu": 9000}`, ""},
	} {
		name := fmt.Sprintf("nad-%d", i)
		kubeapi.CheckWrite(t, tc.name, tc.refused, createNAD(context.Background(), a, name, tc.device, tc.config))
	}
}

// TestVFSettingsClaimsFromClaimOnly: only the claim's own configuration
// for hwnet's driver is judged; another driver's opaque parameters and an
// admin's DeviceClass pass, and an UPDATE that leaves the spec is not
// judged again, so a tightened policy strands no claim.
func TestVFSettingsClaimsFromClaimOnly(t *testing.T) {
	e := startVFAPI(t)
	ctx := context.Background()
	a := e.tenants["team-a"]
	class := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "vlan-300"}, Spec: resourcev1.DeviceClassSpec{
		Config: []resourcev1.DeviceClassConfiguration{{DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
			Driver: "hwnet.io", Parameters: runtime.RawExtension{Raw: []byte(`{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig", "vf": {"vlan": 300, "trust": true}}`)}}}}}}}
	withParams := func(name, params string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: claimSpecParams("hwnet.io", params)}
			_, err := a.kube.ResourceV1().ResourceClaims(a.ns).Create(ctx, c, metav1.CreateOptions{})
			return err
		}
	}
	runWrites(t, []write{
		{"\"VF\" for \"vf\", as Go's JSON reads it", refusal("vf.trust=true", "team-a", "team-a"),
			withParams("upper-vf", `{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig", "vf": {"vlan": 150}, "VF": {"trust": true}}`)},
		{"a key with a Kelvin sign (Go's JSON folds it to k), named as spelled", refusal("vf.lin\u212aState=enable", "team-a", "team-a"),
			withParams("kelvin", `{"apiVersion": "hwnet.io/v1alpha1", "kind": "NetworkConfig", "vf": {"lin\u212aState": "enable"}}`)},
		{"a second configuration with a VLAN out of range", refusal("vf.vlan=300", "team-a", "team-a"), func(ctx context.Context) error {
			spec := claimSpec("hwnet.io", `{"vlan": 150}`)
			spec.Devices.Config = append(spec.Devices.Config, claimSpec("hwnet.io", `{"vlan": 300}`).Devices.Config...)
			_, err := a.kube.ResourceV1().ResourceClaims(a.ns).Create(ctx, &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "two"}, Spec: spec}, metav1.CreateOptions{})
			return err
		}},
		{"another driver's opaque vf", "", func(ctx context.Context) error { return createClaim(ctx, a, "gpu", "gpu.example.com", `{"vlan": 300}`) }},
		{"a claim in range", "", func(ctx context.Context) error { return createClaim(ctx, a, "in-range", "hwnet.io", `{"vlan": 150}`) }},
		{"the admin's DeviceClass with VLAN 300 and trust", "", func(ctx context.Context) error {
			_, err := e.admin.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{})
			return err
		}},
	})
	e.setRules(t, `[]`)
	kubeapi.WaitFor(t, "the emptied policy in force", func() bool {
		err := createClaim(ctx, a, "probe-empty", "hwnet.io", `{"vlan": 150}`)
		return err != nil && strings.Contains(err.Error(), "no rule for namespace team-a")
	})
	runWrites(t, []write{
		{"a label on the claim admitted before", "", func(ctx context.Context) error {
			c, err := a.kube.ResourceV1().ResourceClaims(a.ns).Get(ctx, "in-range", metav1.GetOptions{})
			if err != nil {
				return err
			}
			c.Labels = map[string]string{"touched": "yes"}
			_, err = a.kube.ResourceV1().ResourceClaims(a.ns).Update(ctx, c, metav1.UpdateOptions{})
			return err
		}},
	})
}

// TestVFSettingsNADUpdateJudged: a NAD's config can change, and each
// change is judged as a new one is.
func TestVFSettingsNADUpdateJudged(t *testing.T) {
	e := startVFAPI(t)
	ctx := context.Background()
	a := e.tenants["team-a"]
	if err := createNAD(ctx, a, "vf", true, hostDeviceConfig(`"vlan": 150`)); err != nil {
		t.Fatal(err)
	}
	update := func(ctx context.Context, config string) error {
		nad, err := a.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(a.ns).Get(ctx, "vf", metav1.GetOptions{})
		if err != nil {
			return err
		}
		nad.Spec.Config = config
		_, err = a.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions(a.ns).Update(ctx, nad, metav1.UpdateOptions{})
		return err
	}
	runWrites(t, []write{
		{"config changed to VLAN 300", refusal("vlan=300", "team-a", "team-a"), func(ctx context.Context) error {
			return update(ctx, hostDeviceConfig(`"vlan": 300`))
		}},
		{"config changed to VLAN 160", "", func(ctx context.Context) error { return update(ctx, hostDeviceConfig(`"vlan": 160`)) }},
	})
}

// TestVFSettingsPolicyMissing: without the VFSettingsPolicy hwnet the
// admission policies refuse nothing (the agent refuses VF settings at
// prepare and ADD): the cluster's other claims and NADs keep being
// admitted. The policy's parameter is looked up before its
// matchConditions, so a binding that denied on a missing parameter would
// refuse every claim of every driver.
func TestVFSettingsPolicyMissing(t *testing.T) {
	e := startVFAPI(t)
	ctx := context.Background()
	a := e.tenants["rogue"]
	if err := e.dyn.Resource(vfSettingsPolicies).Delete(ctx, "hwnet", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n := 0
	kubeapi.WaitFor(t, "the policy's absence seen", func() bool {
		n++
		return createClaim(ctx, a, fmt.Sprintf("probe-%d", n), "hwnet.io", `{"vlan": 150}`) == nil
	})
	runWrites(t, []write{
		{"another driver's claim", "", func(ctx context.Context) error { return createClaim(ctx, a, "gpu", "gpu.example.com", `{}`) }},
		{"a NAD", "", func(ctx context.Context) error { return createNAD(ctx, a, "vf", true, hostDeviceConfig(`"vlan": 150`)) }},
	})
}

// TestVFSettingsPolicyCRD: the API server itself refuses a second
// policy, a rule named twice, an empty VLAN range and unbounded lists.
func TestVFSettingsPolicyCRD(t *testing.T) {
	api := kubeapi.Start(t)
	api.ApplyCRD(t, "crds/hwnet.io_vfsettingspolicies.yaml")
	dyn := dynamic.NewForConfigOrDie(api.Config())
	create := func(name, rules string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			var r []any
			if err := json.Unmarshal([]byte(rules), &r); err != nil {
				return err
			}
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "hwnet.io/v1alpha1", "kind": "VFSettingsPolicy",
				"metadata": map[string]any{"name": name}, "spec": map[string]any{"rules": r}}}
			_, err := dyn.Resource(vfSettingsPolicies).Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	labels := map[string]string{}
	for i := range 17 {
		labels[fmt.Sprintf("l%d", i)] = "x"
	}
	many, err := json.Marshal([]any{map[string]any{"name": "r", "namespaceSelector": map[string]any{"matchLabels": labels}}})
	if err != nil {
		t.Fatal(err)
	}
	runWrites(t, []write{
		{"the policy hwnet", "", create("hwnet", `[{"name": "a", "namespaces": ["a"], "allow": {"vlans": [{"min": 1, "max": 4094}], "maxTxRateMbps": 100, "trust": true}}]`)},
		{"a second policy", "hwnet reads one VFSettingsPolicy, named hwnet", create("other", `[]`)},
		{"a rule named twice", "Duplicate value", create("hwnet", `[{"name": "a"}, {"name": "a"}]`)},
		{"a rule without a name", "spec.rules[0].name: Required value", create("hwnet", `[{"namespaces": ["a"]}]`)},
		{"a VLAN range upside down", "min must not be above max", create("hwnet", `[{"name": "a", "allow": {"vlans": [{"min": 200, "max": 100}]}}]`)},
		{"VLAN 4095", "should be less than or equal to 4094", create("hwnet", `[{"name": "a", "allow": {"vlans": [{"min": 1, "max": 4095}]}}]`)},
		{"17 labels", "must have at most 16 items", create("hwnet", string(many))},
		{"partition keys", "", create("hwnet", `[{"name": "a", "allow": {"pKeys": ["0x8001", "0x7fff"]}}]`)},
		{"the invalid partition key", "the invalid partition key", create("hwnet", `[{"name": "a", "allow": {"pKeys": ["0x8000"]}}]`)},
		{"a partition key not as the kernel writes it", "should match", create("hwnet", `[{"name": "a", "allow": {"pKeys": ["0x801"]}}]`)},
	})
}

// goClaimRefusal is the agent's verdict on a claim's vf in ns under
// testVFRules: the refusal's message, "" when allowed.
func goClaimRefusal(t *testing.T, ns, vf string) string {
	t.Helper()
	s, err := vfsettings.Parse(json.RawMessage(vf), "vf")
	if err != nil {
		t.Fatalf("claim vf %s: %v", vf, err)
	}
	return goRefusal(t, ns, s, vfpolicy.ClaimSpelling)
}

// goNADRefusal is goClaimRefusal for a NAD's config.
func goNADRefusal(t *testing.T, ns, config string) string {
	t.Helper()
	d, err := netconf.Parse([]byte(config), "vf", "NAD")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.VFKeys()
	if err != nil {
		t.Fatalf("NAD %s: %v", config, err)
	}
	return goRefusal(t, ns, s, vfpolicy.NADSpelling)
}

func goRefusal(t *testing.T, ns string, s vfsettings.Settings, sp vfpolicy.Spelling) string {
	t.Helper()
	spec, err := vfpolicy.DecodeSpec([]byte(`{"rules": ` + testVFRules + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := vfpolicy.Evaluate(vfpolicy.View{Spec: &spec}, vfpolicy.Namespace{Name: ns, Labels: tenantLabels[ns]}, s, sp); err != nil {
		return err.Error()
	}
	return ""
}

// checkGoRefusal compares the agent's verdict with the admission
// policy's; the agent names a value as it normalized it (0X8001 as 0x8001,
// 802.1AD as 802.1ad), the policy as written, so case is not compared.
func checkGoRefusal(t *testing.T, what, got, want string) {
	t.Helper()
	if !strings.EqualFold(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}
