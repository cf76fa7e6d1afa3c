package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/test/multinetapi"
)

// parityCase is a pod at create: with the networks annotation (unless
// absent) and maybe on the host's network.
type parityCase struct {
	name        string
	networks    string
	absent      bool
	hostNetwork bool
	// refused is empty for a pod both sides admit; else what the admission
	// policy's refusal names (the field or the rule).
	refused string
}

// pod is the case's pod, in namespace default; the policy bindings select
// every namespace.
func (tc parityCase) pod() *corev1.Pod {
	pod := multinetapi.Pod("parity", "")
	if !tc.absent {
		pod.Annotations = map[string]string{mnv1.NetworksAnnotation: tc.networks}
	}
	pod.Spec.HostNetwork = tc.hostNetwork
	return pod
}

// withInterface is one reference to PodNetwork a with interfaceName name.
func withInterface(name string) string {
	return `[{"name":"a","interfaceName":"` + name + `"}]`
}

// references is a list of n references to distinct PodNetworks.
func references(n int) string {
	refs := make([]string, n)
	for i := range refs {
		refs[i] = fmt.Sprintf(`{"name":"net-%d"}`, i)
	}
	return "[" + strings.Join(refs, ",") + "]"
}

// parityCases are the rules of the annotation, each at its boundary.
func parityCases() []parityCase {
	return []parityCase{
		// Blank values are no references (KEP auto-population).
		{name: "absent", absent: true},
		{name: "empty", networks: ""},
		{name: "blank", networks: " \t\r\n"},
		{name: "blank-vtab-formfeed", networks: "\v\f"},
		{name: "blank-unicode-space", networks: "\u00a0\u3000"},
		{name: "empty-list", networks: " [ ] "},

		// The JSON grammar: a list of flat objects, JSON's whitespace.
		{name: "valid", networks: `[{"name":"dataplane","interfaceName":"net1","isDefaultGW":true},{"attachmentName":"fast","interfaceName":"net2"}]`},
		{name: "spaced-json", networks: "[ {\n \"name\" : \"a\" } ,\r\n{\t\"name\":\"b\" } ]"},
		{name: "whitespace-200KiB", networks: "[" + strings.Repeat(" ", 200<<10) + `{"name":"a"}]`},
		{name: "formfeed-between-tokens", networks: "[\f{\"name\":\"a\"}]", refused: "JSON list"},
		{name: "not-a-list", networks: `{"name":"a"}`, refused: "JSON list"},
		{name: "null", networks: `null`, refused: "JSON list"},
		{name: "nested-list", networks: `[[{"name":"a"}]]`, refused: "JSON list"},
		{name: "extra-bracket", networks: `[{"name":"a"}]]`, refused: "JSON list"},
		{name: "two-lists", networks: `[] []`, refused: "JSON list"},
		{name: "trailing-data", networks: `[{"name":"a"}]x`, refused: "JSON list"},
		{name: "trailing-comma", networks: `[{"name":"a"},]`, refused: "JSON list"},
		{name: "missing-comma", networks: `[{"name":"a"} {"name":"b"}]`, refused: "JSON list"},
		{name: "nested-object", networks: `[{"name":"a","x":{}}]`, refused: "JSON list"},
		{name: "empty-object", networks: `[{}]`, refused: "isDefaultGW"},
		{name: "unknown-key", networks: `[{"name":"a","mac":"02:00:00:00:00:01"}]`, refused: "isDefaultGW"},
		{name: "key-case", networks: `[{"Name":"a"}]`, refused: "isDefaultGW"},
		{name: "escape", networks: `[{"name":"\u0061"}]`, refused: "backslash"},
		{name: "null-value", networks: `[{"name":null,"attachmentName":"b"}]`, refused: "isDefaultGW"},
		{name: "gw-null", networks: `[{"name":"a","isDefaultGW":null}]`, refused: "isDefaultGW"},
		{name: "gw-string", networks: `[{"name":"a","isDefaultGW":"true"}]`, refused: "isDefaultGW"},
		{name: "name-number", networks: `[{"name":1}]`, refused: "isDefaultGW"},
		{name: "repeated-interface-key", networks: `[{"name":"a","interfaceName":"x","interfaceName":"y"}]`, refused: "once"},
		{name: "repeated-gw-key", networks: `[{"name":"a","isDefaultGW":false,"isDefaultGW":false}]`, refused: "once"},
		{name: "repeated-name-key", networks: `[{"name":"a","name":"a"}]`, refused: "exactly one"},

		// References: exactly one of name and attachmentName, each a
		// lower-case DNS subdomain; a PodNetwork once.
		{name: "by-attachment", networks: `[{"attachmentName":"fast"},{"attachmentName":"fast"}]`},
		{name: "both-refs", networks: `[{"name":"a","attachmentName":"b"}]`, refused: "attachmentName"},
		{name: "empty-name-and-attachment", networks: `[{"name":"","attachmentName":"b"}]`, refused: "attachmentName"},
		{name: "no-ref", networks: `[{"interfaceName":"net1"}]`, refused: "attachmentName"},
		{name: "empty-name", networks: `[{"name":""}]`, refused: `name ""`},
		{name: "bad-name", networks: `[{"name":"Data_Plane"}]`, refused: "Data_Plane"},
		{name: "bad-attachment", networks: `[{"attachmentName":"-fast"}]`, refused: "-fast"},
		{name: "name-253", networks: `[{"name":"` + strings.Repeat("a", 253) + `"}]`},
		{name: "name-254", networks: `[{"name":"` + strings.Repeat("a", 254) + `"}]`, refused: "not a valid object name"},
		{name: "dup-network", networks: `[{"name":"a"},{"name":"a"}]`, refused: `PodNetwork "a"`},
		{name: "two-default-gw", networks: `[{"name":"a","isDefaultGW":true},{"name":"b","isDefaultGW":true}]`, refused: "isDefaultGW"},
		{name: "default-gw-false-twice", networks: `[{"name":"a","isDefaultGW":false},{"name":"b","isDefaultGW":false}]`},
		{name: "refs-32", networks: references(mnv1.MaxNetworks)},
		{name: "refs-33", networks: references(mnv1.MaxNetworks + 1), refused: "at most 32"},
		{name: "refs-2000", networks: references(2000), refused: "at most 32"},

		// Interface names: Linux's 15 bytes, in printable ASCII.
		{name: "if-15-bytes", networks: withInterface("abcdefghijklmno")},
		{name: "if-16-bytes", networks: withInterface("abcdefghijklmnop"), refused: "interfaceName"},
		{name: "if-9-two-byte-letters", networks: withInterface(strings.Repeat("é", 9)), refused: "interfaceName"},
		{name: "if-8-two-byte-letters", networks: withInterface(strings.Repeat("é", 8)), refused: "interfaceName"},
		{name: "if-7-two-byte-letters-and-ascii", networks: withInterface(strings.Repeat("é", 7) + "1"), refused: "interfaceName"},
		{name: "if-byte-a0", networks: withInterface("à"), refused: "interfaceName"},
		{name: "if-empty", networks: withInterface(""), refused: "interfaceName"},
		{name: "if-dot", networks: withInterface("."), refused: "interfaceName"},
		{name: "if-dotdot", networks: withInterface(".."), refused: "interfaceName"},
		{name: "if-three-dots", networks: withInterface("...")},
		{name: "if-punctuation", networks: withInterface("n-1_[x]{y},z.w")},
		{name: "if-slash", networks: withInterface("n/1"), refused: "interfaceName"},
		{name: "if-colon", networks: withInterface("n:1"), refused: "interfaceName"},
		{name: "if-space", networks: withInterface("n 1"), refused: "interfaceName"},
		{name: "if-tab", networks: withInterface("n\t1"), refused: "interfaceName"},
		{name: "if-del", networks: withInterface("n\x7f1"), refused: "interfaceName"},
		{name: "dup-interface", networks: `[{"name":"a","interfaceName":"net1"},{"name":"b","interfaceName":"net1"}]`, refused: `interfaceName "net1"`},

		// A pod on the host's network carries no annotation at all.
		{name: "host-network", networks: `[{"name":"a"}]`, hostNetwork: true, refused: "hostNetwork"},
		{name: "host-network-empty", networks: "", hostNetwork: true, refused: "hostNetwork"},
		{name: "host-network-absent", absent: true, hostNetwork: true},
	}
}

// TestKEP3698_PodStaticValidationsParity: the admission policy on a real
// API server and hwnet's own parser (mnv1.ValidatePod) give every case
// the case's verdict; a pod one admits and the other refuses would be
// refused late (the controller never lifts its gate) or not at all. The
// API server's refusals name the annotation and the rule; admitted pods
// with the annotation carry the scheduling gate.
func TestKEP3698_PodStaticValidationsParity(t *testing.T) {
	api, _ := multinetAPI(t)
	pods := api.Client().CoreV1().Pods("default")
	// The policies act on dry runs too, and a dry run leaves nothing
	// behind for the next case.
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, tc := range parityCases() {
		t.Run(tc.name, func(t *testing.T) {
			goErr := mnv1.ValidatePod(tc.pod())
			got, apiErr := pods.Create(context.Background(), tc.pod(), dryRun)
			admit := tc.refused == ""
			if (goErr == nil) != admit || (apiErr == nil) != admit {
				t.Fatalf("want admitted %v; ValidatePod: %v; the API server: %v", admit, goErr, apiErr)
			}
			if admit {
				checkGate(t, tc, got)
			} else if !strings.Contains(apiErr.Error(), mnv1.NetworksAnnotation) || !strings.Contains(apiErr.Error(), tc.refused) {
				t.Errorf("the API server: %v, want a refusal naming %s and %q", apiErr, mnv1.NetworksAnnotation, tc.refused)
			}
		})
	}
}

// checkGate: an admitted pod with the annotation waits for its networks
// behind the scheduling gate; one without has no gate.
func checkGate(t *testing.T, tc parityCase, pod *corev1.Pod) {
	t.Helper()
	gates := pod.Spec.SchedulingGates
	if tc.absent && len(gates) != 0 || !tc.absent && (len(gates) != 1 || gates[0].Name != mnv1.SchedulingGate) {
		t.Errorf("scheduling gates %v; want %s exactly when the annotation is present", gates, mnv1.SchedulingGate)
	}
}
