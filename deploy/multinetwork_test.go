package deploy_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/multinetapi"
)

// multinetAPI is a real API server with the KEP-3698 CRDs and the pod
// admission policies of deploy/ installed and in force.
func multinetAPI(t *testing.T) (*kubeapi.Server, dynamic.Interface) {
	t.Helper()
	api := multinetapi.Start(t)
	client, err := dynamic.NewForConfig(api.Config())
	if err != nil {
		t.Fatal(err)
	}
	return api, client
}

// TestKEP3698_PodReferencesFixedAtCreate: references cannot change later,
// and a pod without references is neither gated nor refused.
func TestKEP3698_PodReferencesFixedAtCreate(t *testing.T) {
	api, _ := multinetAPI(t)
	pods := api.Client().CoreV1().Pods("default")
	ctx := context.Background()
	plain, err := pods.Create(ctx, multinetapi.Pod("plain", ""), metav1.CreateOptions{})
	if err != nil || len(plain.Spec.SchedulingGates) != 0 {
		t.Fatalf("pod without references: %v, gates %v; want admitted ungated (auto-population keeps today's behaviour)", err, plain.Spec.SchedulingGates)
	}
	pod, err := pods.Create(ctx, multinetapi.Pod("fixed", `[{"name":"a"}]`), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Annotations[mnv1.NetworksAnnotation] = `[{"name":"b"}]`
	if _, err := pods.Update(ctx, pod, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "cannot change") {
		t.Errorf("changing references: %v, want refused", err)
	}
}

func podNetwork(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetAPIVersion(mnv1.Group + "/" + mnv1.Version)
	u.SetKind("PodNetwork")
	u.SetName(name)
	return u
}

// TestKEP3698_PodNetworkSchema: defaults, limits and mutability are the
// API server's, from the CRD.
func TestKEP3698_PodNetworkSchema(t *testing.T) {
	_, client := multinetAPI(t)
	pns := client.Resource(mnv1.PodNetworkResource)
	ctx := context.Background()
	created, err := pns.Create(ctx, podNetwork("dataplane", map[string]any{"provider": mnv1.Provider,
		"parametersRefs": []any{map[string]any{"group": "k8s.cni.cncf.io", "kind": "NetworkAttachmentDefinition", "name": "sriov", "namespace": "default"}}}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if enabled, found, _ := unstructured.NestedBool(created.Object, "spec", "enabled"); !found || !enabled {
		t.Errorf("spec.enabled = %v (set %v), want defaulted to true", enabled, found)
	}
	for _, tc := range []struct {
		name    string
		spec    map[string]any
		wantErr string
	}{
		{name: "no-domain", spec: map[string]any{"provider": "hwnet"}, wantErr: "spec.provider"},
		{name: "too-long", spec: map[string]any{"provider": "a.io/" + strings.Repeat("x", 253)}, wantErr: "spec.provider"},
		{name: "ref-without-name", spec: map[string]any{"parametersRefs": []any{map[string]any{"group": "g", "kind": "k"}}}, wantErr: "name"},
	} {
		if _, err := pns.Create(ctx, podNetwork(tc.name, tc.spec), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: create: %v, want refused naming %s", tc.name, err, tc.wantErr)
		}
	}
	checkMutability(t, pns, created)
}

func checkMutability(t *testing.T, pns dynamic.ResourceInterface, pn *unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	for _, tc := range []struct {
		field string
		value any
		ok    bool
	}{
		{field: "enabled", value: false, ok: true},
		{field: "provider", value: "other.io/cni"},
		{field: "parametersRefs", value: []any{}},
	} {
		cur, err := pns.Get(ctx, pn.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(cur.Object, tc.value, "spec", tc.field); err != nil {
			t.Fatal(err)
		}
		_, err = pns.Update(ctx, cur, metav1.UpdateOptions{})
		if tc.ok && err != nil {
			t.Errorf("changing spec.%s: %v, want allowed", tc.field, err)
		} else if !tc.ok && (err == nil || !strings.Contains(err.Error(), "immutable")) {
			t.Errorf("changing spec.%s: %v, want refused as immutable", tc.field, err)
		}
	}
}

// TestKEP3698_PodNetworkAttachmentSchema: podNetworkName is required, the
// spec is immutable and at most 5 conditions are kept.
func TestKEP3698_PodNetworkAttachmentSchema(t *testing.T) {
	_, client := multinetAPI(t)
	pnas := client.Resource(mnv1.PodNetworkAttachmentResource).Namespace("default")
	ctx := context.Background()
	pna := func(name string, spec map[string]any) *unstructured.Unstructured {
		u := podNetwork(name, spec)
		u.SetKind("PodNetworkAttachment")
		u.SetNamespace("default")
		return u
	}
	if _, err := pnas.Create(ctx, pna("empty", map[string]any{}), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "podNetworkName") {
		t.Errorf("create without podNetworkName: %v, want refused naming it", err)
	}
	created, err := pnas.Create(ctx, pna("fast", map[string]any{"podNetworkName": "dataplane"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(created.Object, "other", "spec", "podNetworkName")
	if _, err := pnas.Update(ctx, created, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("changing spec.podNetworkName: %v, want refused as immutable", err)
	}
	cur, err := pnas.Get(ctx, "fast", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var conds []any
	for _, ty := range []string{"A", "B", "C", "D", "E", "F"} {
		conds = append(conds, map[string]any{"type": ty, "status": "True", "reason": "R", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"})
	}
	_ = unstructured.SetNestedSlice(cur.Object, conds, "status", "conditions")
	if _, err := pnas.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err == nil || !strings.Contains(err.Error(), "status.conditions") {
		t.Errorf("6 conditions: %v, want refused (at most 5)", err)
	}
}
