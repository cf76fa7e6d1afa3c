package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/controller"
)

// waitAttachmentCondition waits until the attachment's condition has
// status and reason at its generation, and returns it.
func (c *cluster) waitAttachmentCondition(t *testing.T, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	waitFor(t, fmt.Sprintf("PodNetworkAttachment %s %s=%s (%s)", name, typ, status, reason), func() (bool, string) {
		u, err := c.dyn.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pna, err := mnv1.FromUnstructured[mnv1.PodNetworkAttachment](u)
		if err != nil {
			return false, err.Error()
		}
		cond := meta.FindStatusCondition(pna.Status.Conditions, typ)
		if cond == nil {
			return false, fmt.Sprintf("conditions %v", pna.Status.Conditions)
		}
		got = *cond
		return cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == pna.Generation, fmt.Sprintf("%+v at generation %d", *cond, pna.Generation)
	})
	return got
}

func nadRef(namespace, name string) mnv1.ParametersRef {
	return mnv1.ParametersRef{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition", Namespace: namespace, Name: name}
}

// TestKEP3698_AttachmentParamsAllowedNamespaces: a PodNetworkAttachment,
// an application developer's object, may name parameters only where the
// agents' --cni-allowed-namespaces lets its namespace's pods select them;
// one naming another namespace is not Ready, saying which, and its pod
// stays gated rather than loop on NetworkNotAllowed at every sandbox
// attempt. A PodNetwork, an administrator's, may name any namespace.
func TestKEP3698_AttachmentParamsAllowedNamespaces(t *testing.T) {
	c := newCluster(t)
	c.api.CreateNamespace(t, "other")
	other := &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Name: "sriov-other", Namespace: "other"}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: sriovConfig}}
	if _, err := c.nads.K8sCniCncfIoV1().NetworkAttachmentDefinitions("other").Create(context.Background(), other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.run(t, c.api.Config(), "a", controller.Options{CreateDefault: true, AllowedNamespaces: netconf.AllowedNamespaces{"default", "tenants"}})
	c.createNAD(t, "sriov-net", sriovConfig)
	c.createPodNetwork(t, "dataplane", true, "sriov-net")
	c.createPodNetwork(t, "admin-other", true, "other/sriov-other")
	c.waitCondition(t, "admin-other", mnv1.ConditionParamsReady, metav1.ConditionTrue, mnv1.ReasonParamsValid)

	c.createAttachment(t, "own", "dataplane", nadRef("", "sriov-net"))
	c.waitAttachmentCondition(t, "own", mnv1.ConditionReady, metav1.ConditionTrue, mnv1.ReasonReady)
	c.createAttachment(t, "foreign", "dataplane", nadRef("other", "sriov-other"))
	params := c.waitAttachmentCondition(t, "foreign", mnv1.ConditionParamsReady, metav1.ConditionFalse, mnv1.ReasonNamespaceNotAllowed)
	for _, want := range []string{`"other"`, "default, tenants", "--cni-allowed-namespaces"} {
		if !strings.Contains(params.Message, want) {
			t.Errorf("ParamsReady message %q does not say %s", params.Message, want)
		}
	}
	c.waitAttachmentCondition(t, "foreign", mnv1.ConditionReady, metav1.ConditionFalse, mnv1.ReasonParamsNotReady)

	c.createPod(t, "via-foreign", `[{"attachmentName":"foreign"}]`)
	c.podEvent(t, "via-foreign", controller.ReasonNetworkNotReady, `namespace "other"`)
	if got := c.gates(t, "via-foreign"); !slices.Equal(got, []string{mnv1.SchedulingGate}) {
		t.Errorf("pod through an attachment to a refused namespace: gates %v, want it held", got)
	}
}
